/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One shared-memory connection's channel on a libuv loop: a byte stream
 * each way through the two rings of a segment (seg.h, ring.h), set up
 * over a Unix-domain stream socket that then stays open to tell when the
 * peer goes. It is shaped for a frame engine like the TCP transport's
 * (transport/tcp/stream.c): writes take what fits of a gather list and
 * say when room comes back; reads are spans parsed in place (headers
 * copied out first: the peer can change the bytes under us) and consumed.
 * docs/architecture.md, "Shared memory: the channel".
 *
 * Set-up. A listener binds a filesystem path, or an abstract name
 * "@NAME" (Linux: no file, gone with the socket, and no permissions: any
 * process in the network namespace may connect; admitting a peer is for
 * the layers above). The accepting side
 * creates the segment and sends, in one message with its three fds
 * (memfd, its doorbell, the connector's doorbell; SCM_RIGHTS), a hello;
 * the connector checks it, attaches and answers; each side's ready comes
 * then. Hello, answer and bye are one message format, 64 bytes:
 *   0  u32 magic: "RMXH" hello, "RMXA" answer, "RMXB" bye
 *   4  u16 version (1)    6 u16 length (64)
 *   8  u32 hello: each ring's size; bye: the bytes the sender ever wrote
 *      (mod 2^32); answer: 0
 *   12 i32 answer: 0, or the RMX_E* code the connector refused with
 *   16 the sender's boot id, 36 characters (hello and answer)
 *   52 zero
 * Only the hello carries fds (exactly three); any other count, a short or
 * long message, a wrong magic, version or size, another boot id ("same
 * host" means same kernel) ends the set-up with a reason.
 *
 * Liveness. After set-up the socket carries nothing but the bye: its end
 * (EOF, HUP) is the peer's process closing or dying, noticed at once with
 * no keepalive. The peer's close (a bye, then the end): what it wrote is
 * delivered, then end(0). An end with no bye first: what is in the ring
 * is delivered too, then end(RMX_ECONNRESET).
 *
 * Callbacks come from the loop, or from rmx__shm_chan_poll (making them
 * is its purpose), never from inside another call of ours:
 *   ready     once, when set-up is done (not when it fails);
 *   readable  bytes came that were not there at its last call: the owner
 *             peeks, copies and consumes what it can; bytes left (part of
 *             a frame) wait for more to come;
 *   writable  once after a write that took less than offered, when room
 *             comes (not if a later write took all it was offered);
 *   end       exactly once per started channel, with why (a reason for
 *             the log): set-up failures, the peer's close (0) or loss
 *             (RMX_ECONNRESET), a broken ring or protocol (RMX_EPROTO),
 *             set-up taking too long (RMX_ETIMEDOUT), or, when the owner
 *             closes first, RMX_ECANCELED just before closed (the cause a
 *             call found, if the loop had not raised it yet). After end no
 *             readable or writable; the owner closes the channel;
 *   closed    once, after close, the last call: memory and fds are given
 *             back, the channel's memory is the owner's again.
 * Any callback may call close.
 *
 * Sleeping or polling. A sleeping channel (cfg.polling 0) arms its rings
 * and polls its doorbell (uv_poll); the peer rings it only while armed.
 * A polling channel never arms: its owner calls rmx__shm_chan_poll once
 * per loop turn, which makes no system call when nothing changed, and the
 * peer never rings for it.
 *
 * Not thread-safe: one loop, one thread per channel (the two sides of a
 * connection may live on two loops, in two threads or processes).
 */
#ifndef RMX_SHM_CHAN_H
#define RMX_SHM_CHAN_H

#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <uv.h>

#include "cma.h"
#include "seg.h"

#define RMX_SHM_MSG 64u                /* hello, answer, bye */
#define RMX_SHM_HELLO_MAGIC 0x484d5852u /* "RMXH", little-endian */
#define RMX_SHM_ANSWER_MAGIC 0x414d5852u /* "RMXA" */
#define RMX_SHM_BYE_MAGIC 0x424d5852u    /* "RMXB" */
#define RMX_SHM_HANDSHAKE_MS 10000u     /* cfg.handshake_ms 0 */
#define RMX_SHM_NAME_MAX 107            /* a path or "@" and an abstract name */
#define RMX_SHM_OFFER_MAGIC 0x4f4d5852u  /* "RMXO": one copy's probe */
#define RMX_SHM_VERDICT_MAGIC 0x564d5852u /* "RMXV": what the probe found */
/* Set-up feature: the offers follow, and one copy means each side pulls
 * (reads finish with TF_RD_DONE). Bit 0 was an earlier one copy whose
 * target also wrote into the initiator: a build that offers only that
 * shares no one copy with this one, and their segment carries every byte. */
#define RMX_SHM_FEAT_COPY 2u

typedef struct rmx_shm_chan rmx_shm_chan_t;
typedef struct rmx_shm_listener rmx_shm_listener_t;

typedef struct rmx_shm_chan_cbs {
  void (*ready)(rmx_shm_chan_t *ch);
  void (*readable)(rmx_shm_chan_t *ch);
  void (*writable)(rmx_shm_chan_t *ch);
  void (*end)(rmx_shm_chan_t *ch, int status, const char *why);
  void (*closed)(rmx_shm_chan_t *ch);
  /* Optional: whether one copy was agreed (ok 1) or not, with why not;
   * once, after ready. */
  void (*copy)(rmx_shm_chan_t *ch, int ok, const char *why);
} rmx_shm_chan_cbs_t;

typedef struct rmx_shm_chan_cfg {
  uint32_t ring_size;       /* accepting side: each ring's bytes (0: RMX_SHM_RING_DEFAULT) */
  unsigned handshake_ms;    /* set-up's limit (0: RMX_SHM_HANDSHAKE_MS) */
  int polling;              /* 1: never sleep; the owner calls rmx__shm_chan_poll */
  const char *boot_id_path; /* tests: read this side's boot id here (NULL: the kernel's) */
  int copy;                 /* 1: offer the peer one copy (cma.h) */
} rmx_shm_chan_cfg_t;

/* One copy between the two processes (cma.h), agreed over the liveness
 * socket once the channel is up (chan_copy.c; docs/protocol.md, "One
 * copy"): each side offers a probe, reads the peer's and says whether it
 * reached it. Both must, or the segment carries everything. */
typedef struct rmx_shm_copy {
  rmx_shm_cma_probe_t probe; /* ours: the peer reads it */
  pid_t pid;                 /* the peer's, from the socket's credentials */
  uint8_t offered;           /* both set-ups said the offers follow */
  uint8_t told;              /* cbs.copy was called */
  int8_t mine, theirs;       /* we reach the peer, it reaches us: 1, 0, -1 not known */
  const char *why;           /* why not, once known */
} rmx_shm_copy_t;

enum { CH_IDLE, CH_WAIT_HELLO, CH_WAIT_ANSWER, CH_UP, CH_ENDED };

struct rmx_shm_chan {
  void *data; /* the owner's */
  uv_loop_t *loop;
  rmx_shm_chan_cbs_t cbs;
  rmx_shm_chan_cfg_t cfg;
  int state;
  int sock;                 /* the Unix socket: set-up, then liveness; -1: none */
  int has_seg;              /* seg is created or attached */
  rmx_shm_seg_t seg;
  rmx_shm_ring_t tx, rx;
  uv_poll_t sock_poll, bell_poll;
  uv_timer_t timer;         /* the set-up's limit */
  uv_idle_t kick;           /* work for the next loop turn */
  int handles;              /* handles open (their close ends with closed) */
  int sock_polled, bell_polled, bell_started;
  uint32_t rx_told;         /* the peer's head at the last readable */
  int want_wr;              /* a write took less than offered: writable owed */
  int kicked, in_dispatch, closing, ended;
  int said_bye;             /* rmx__shm_chan_cut: nothing more goes into the ring */
  /* Polling: 1 while the owner wants the ring read every loop turn whether
   * or not it spins (its handshake, before its own busy-poll starts); NULL:
   * never. Asked after each turn's read. */
  int (*eager)(rmx_shm_chan_t *ch);
  rmx_shm_copy_t copy;
  int late_status;          /* an end found inside a call, raised from the loop */
  const char *late_why;
  char name[RMX_SHM_NAME_MAX + 1];
  char why[320];            /* a formatted reason */
};

struct rmx_shm_listener {
  void *data; /* the owner's */
  uv_loop_t *loop;
  uv_poll_t poll;
  int fd;
  int unlink_path;          /* 1: name is a file to remove at close */
  char name[RMX_SHM_NAME_MAX + 1];
  void (*incoming)(rmx_shm_listener_t *l);
  void (*closed)(rmx_shm_listener_t *l);
};

/* Listen on name (a path, or "@NAME"). incoming(l) is called while a peer
 * waits: it calls rmx__shm_chan_accept until RMX_EAGAIN (a peer left
 * waiting makes the loop call it again). Returns 0; RMX_EINVAL (no name,
 * too long), RMX_EADDRINUSE (taken: a stale file is not removed),
 * RMX_EACCES, RMX_ENOENT (no such folder), RMX_EMFILE, RMX_EIO. */
int rmx__shm_listen(rmx_shm_listener_t *l, uv_loop_t *loop, const char *name,
                    void (*incoming)(rmx_shm_listener_t *l));

/* A listening Unix socket on name, no loop's (a listener group's gate):
 * 0 and *fd, or rmx__shm_listen's errors; its end, which removes a path.
 * The next peer waiting on a listening fd: 0 and *fd, or RMX_EAGAIN,
 * RMX_EMFILE, RMX_ENOMEM, RMX_EIO. */
int rmx__shm_listen_fd(const char *name, int *fd);
void rmx__shm_unlisten_fd(const char *name, int fd);
int rmx__shm_accept_fd(int lfd, int *fd);

/* Stop (1) or start again (0) taking peers: they wait in the backlog. */
int rmx__shm_listener_pause(rmx_shm_listener_t *l, int pause);

/* Stop listening (the path is removed); closed(l) comes from the loop.
 * Channels accepted from it live on. */
void rmx__shm_listener_close(rmx_shm_listener_t *l, void (*closed)(rmx_shm_listener_t *l));

/* Take the next waiting peer on ch, on the listener's loop, and start its
 * set-up. Returns 0 (started: ready or end follows), RMX_EAGAIN (nobody
 * waits), RMX_EMFILE, RMX_ENOMEM, RMX_EIO; on an error ch is not started
 * and needs no close. cfg may be NULL (defaults). */
int rmx__shm_chan_accept(rmx_shm_chan_t *ch, rmx_shm_listener_t *l,
                         const rmx_shm_chan_cfg_t *cfg, const rmx_shm_chan_cbs_t *cbs);

/* rmx__shm_chan_accept for a peer already accepted elsewhere (fd, from
 * rmx__shm_accept_fd; name: its listener's), on loop: 0, or RMX_EINVAL
 * (then fd is still the caller's). */
int rmx__shm_chan_accept_fd(rmx_shm_chan_t *ch, uv_loop_t *loop, int fd, const char *name,
                            const rmx_shm_chan_cfg_t *cfg, const rmx_shm_chan_cbs_t *cbs);

/* Connect ch to the listener at name and start the set-up. Returns 0
 * (started: ready or end follows, a listener that is not there too) or
 * RMX_EINVAL (no name, too long, no callbacks): then ch is not started. */
int rmx__shm_chan_connect(rmx_shm_chan_t *ch, uv_loop_t *loop, const char *name,
                          const rmx_shm_chan_cfg_t *cfg, const rmx_shm_chan_cbs_t *cbs);

/* A Unix stream socket connecting to name: 0 and *fd (connected, or on its
 * way), RMX_ECONNREFUSED (nobody listens there: a Unix socket says at
 * once), RMX_EAGAIN (its backlog is full), RMX_EINVAL, RMX_EMFILE. */
int rmx__shm_sock_connect(const char *name, int *fd);
/* Start ch's set-up over fd, a socket from rmx__shm_sock_connect (ch owns
 * it from here): 0, or RMX_EINVAL (then fd is still the caller's). */
int rmx__shm_chan_connect_fd(rmx_shm_chan_t *ch, uv_loop_t *loop, int fd, const char *name,
                             const rmx_shm_chan_cfg_t *cfg, const rmx_shm_chan_cbs_t *cbs);

/* Copy up to the free room from iov[0..n) into the ring (in order) and
 * return the bytes taken; fewer than offered owes a writable. Returns
 * RMX_ENOTCONN before ready, after end or close; RMX_EPROTO when the peer
 * broke the ring (end follows from the loop); RMX_EINVAL. */
ssize_t rmx__shm_chan_write(rmx_shm_chan_t *ch, const struct iovec *iov, int n);

/* The ring's read side (ring.h): the readable bytes as spans into shared
 * memory (never parse them there), a copy of n bytes at off, and giving
 * n bytes back. From ready until close; else RMX_ENOTCONN. */
ssize_t rmx__shm_chan_peek(rmx_shm_chan_t *ch, struct iovec span[2]);
int rmx__shm_chan_copy(rmx_shm_chan_t *ch, size_t off, void *dst, size_t n);
int rmx__shm_chan_consume(rmx_shm_chan_t *ch, size_t n);

/* Busy-polling: look at both rings (no system call when nothing changed)
 * and make the callbacks they call for. Returns 1 when it made one, else
 * 0. Also allowed on a sleeping channel. */
int rmx__shm_chan_poll(rmx_shm_chan_t *ch);

/* Switch between sleeping (0) and polling (1). */
void rmx__shm_chan_set_polling(rmx_shm_chan_t *ch, int polling);

/* One copy (cma.h). direct: 1 when both sides agreed to it, else 0; sync
 * 1 first takes the agreement's messages the socket holds (a peer sends
 * its verdict before its first request that relies on it). pull: len
 * bytes from remote in the peer into local here, only ever in this
 * direction, so that no peer writes into this process (a peer we gave up
 * on may still be running: it must find nothing of ours to write into):
 * rmx__shm_cma_copy's results; RMX_EPROTO when it was not agreed;
 * RMX_ECONNRESET when the peer has ended the connection, checked before
 * the copy and again after it (what it gives up on it may reuse at once,
 * so bytes read across its end may be anything). */
int rmx__shm_chan_direct(rmx_shm_chan_t *ch, int sync);
int rmx__shm_chan_pull(rmx_shm_chan_t *ch, void *local, uint64_t remote, size_t len);

/* End our side now (the memory a peer may pull from is going): a bye for
 * what the ring holds goes to the peer, which reads it all and then ends,
 * and our socket's write side is shut before this returns, so a pull the
 * peer makes from now on, or one it was making, fails (its check after
 * the copy sees the end). Nothing more is written into the ring; the
 * channel still reads until its owner closes it. */
void rmx__shm_chan_cut(rmx_shm_chan_t *ch);

/* Close: a bye goes to the peer if the channel is up (what we wrote is
 * read there first), the socket is shut, and closed(ch) comes from the
 * loop, after end (RMX_ECANCELED if nothing ended it before). A second
 * close does nothing. Only a started channel is closed. */
void rmx__shm_chan_close(rmx_shm_chan_t *ch);

/* ---- between chan.c and chan_setup.c ---- */

/* Start a channel's handles on loop around sock (-1: none yet). */
void rmx__shm_chan_start(rmx_shm_chan_t *ch, uv_loop_t *loop, int sock,
                         const rmx_shm_chan_cfg_t *cfg, const rmx_shm_chan_cbs_t *cbs);
/* The socket is readable (or ended) during set-up. */
void rmx__shm_chan_setup_input(rmx_shm_chan_t *ch);
/* Set-up is done: rings joined, I/O starts, ready. */
void rmx__shm_chan_up(rmx_shm_chan_t *ch);
/* End the channel from a loop callback (the first end is the one). */
void rmx__shm_chan_fail(rmx_shm_chan_t *ch, int status, const char *why);
/* End it from the loop, for a failure found inside a call. */
void rmx__shm_chan_fail_later(rmx_shm_chan_t *ch, int status, const char *why);
/* chan_copy.c: the channel is up: make and send our offer (or say at
 * once that there is no one copy). A message came on the socket (k bytes
 * at m): *taken 1 when it was one of the agreement's, and then NULL, or
 * why it breaks the agreement (the channel must end). Whether both
 * verdicts said yes. */
void rmx__shm_copy_up(rmx_shm_chan_t *ch);
const char *rmx__shm_copy_in(rmx_shm_chan_t *ch, const uint8_t *m, ssize_t k, int *taken);
int rmx__shm_copy_agreed(const rmx_shm_chan_t *ch);
/* msg.c: one message of the socket's format, and its check (NULL: good). */
void rmx__shm_msg_put(uint8_t m[RMX_SHM_MSG], uint32_t magic, uint32_t word, int32_t status,
                      const char *boot_id);
const char *rmx__shm_msg_check(const uint8_t *m, ssize_t len, uint32_t magic, uint32_t *word,
                               int32_t *status, char boot_id[RMX_SHM_BOOT_ID_LEN + 1]);

#endif
