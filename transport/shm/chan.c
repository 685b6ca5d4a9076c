/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A shared-memory channel once set up (chan.h): writes and reads through
 * the rings, sleeping on the doorbell or polled, the liveness socket, the
 * end and the close. The set-up itself is chan_setup.c's.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <rmx/rmx.h>

#include "../../src/base/bytes.h"
#include "chan.h"

/* readable calls in one go before the loop gets a turn (a peer that never
 * stops writing must not starve the loop's other handles) */
#define DISPATCH_MAX 16

static const char WHY_RX[] = "the peer broke the ring it writes (an index out of range)";
static const char WHY_TX[] = "the peer broke the ring it reads (an index out of range)";

static int up(const rmx_shm_chan_t *ch)
{
  return ch->state == CH_UP && !ch->closing && !ch->ended;
}

/* ---- from the loop ---- */

static void kick_cb(uv_idle_t *h);

static void kick(rmx_shm_chan_t *ch)
{
  if (ch->kicked || ch->closing)
    return;
  ch->kicked = 1;
  uv_idle_start(&ch->kick, kick_cb);
}

void rmx__shm_chan_fail(rmx_shm_chan_t *ch, int status, const char *why)
{
  if (ch->ended || ch->closing)
    return; /* the first end is the one; a closing channel ends at its close */
  ch->ended = 1;
  ch->state = CH_ENDED;
  ch->want_wr = 0;
  uv_timer_stop(&ch->timer);
  if (ch->sock_polled)
    uv_poll_stop(&ch->sock_poll);
  if (ch->bell_polled)
    uv_poll_stop(&ch->bell_poll);
  /* the peer learns at once, whenever our owner closes */
  if (ch->sock >= 0)
    shutdown(ch->sock, SHUT_RDWR);
  ch->cbs.end(ch, status, why);
}

void rmx__shm_chan_fail_later(rmx_shm_chan_t *ch, int status, const char *why)
{
  if (ch->ended || ch->closing || ch->late_status)
    return;
  ch->late_status = status;
  ch->late_why = why;
  kick(ch);
}

/* ---- the rings ---- */

/* Tell the owner of bytes that came since the last readable; when none
 * came and may_arm, arm the ring (sleep). Returns the callbacks made. */
static int read_side(rmx_shm_chan_t *ch, int may_arm)
{
  int made = 0;
  while (up(ch)) {
    struct iovec span[2];
    if (rmx__shm_ring_peek(&ch->rx, span) < 0) {
      rmx__shm_chan_fail(ch, RMX_EPROTO, WHY_RX);
      break;
    }
    if (ch->rx.seen == ch->rx_told) {
      if (!may_arm)
        break;
      ssize_t a = rmx__shm_ring_arm_read(&ch->rx);
      if (a < 0)
        rmx__shm_chan_fail(ch, RMX_EPROTO, WHY_RX);
      if (a <= 0)
        break; /* armed: the doorbell wakes us */
      continue; /* more came meanwhile */
    }
    if (made == DISPATCH_MAX) {
      kick(ch);
      break;
    }
    ch->rx_told = ch->rx.seen;
    made++;
    ch->cbs.readable(ch);
  }
  return made;
}

/* The writable owed, once there is room; when there is none and may_arm,
 * arm the ring. */
static int write_side(rmx_shm_chan_t *ch, int may_arm)
{
  if (!ch->want_wr || !up(ch))
    return 0;
  ssize_t room = rmx__shm_ring_room(&ch->tx);
  if (room == 0 && may_arm)
    room = rmx__shm_ring_arm_write(&ch->tx);
  if (room < 0)
    rmx__shm_chan_fail(ch, RMX_EPROTO, WHY_TX);
  if (room <= 0)
    return 0;
  ch->want_wr = 0;
  ch->cbs.writable(ch);
  return 1;
}

static int dispatch(rmx_shm_chan_t *ch, int may_arm)
{
  if (ch->in_dispatch)
    return 0; /* poll called from one of our callbacks: we are on it */
  ch->in_dispatch = 1;
  int made = write_side(ch, may_arm);
  made += read_side(ch, may_arm);
  ch->in_dispatch = 0;
  return made;
}

/* Polling, while the owner wants it (ch->eager): the loop turns again at
 * once to read the ring, since nothing rings for a poller. */
static void stay_eager(rmx_shm_chan_t *ch)
{
  if (ch->cfg.polling && ch->eager && up(ch) && ch->eager(ch))
    kick(ch);
}

static void kick_cb(uv_idle_t *h)
{
  rmx_shm_chan_t *ch = h->data;
  uv_idle_stop(h);
  ch->kicked = 0;
  if (ch->late_status) {
    rmx__shm_chan_fail(ch, ch->late_status, ch->late_why);
    return;
  }
  if (up(ch))
    dispatch(ch, !ch->cfg.polling);
  stay_eager(ch);
}

static void bell_cb(uv_poll_t *h, int status, int events)
{
  rmx_shm_chan_t *ch = h->data;
  (void)events;
  if (!up(ch))
    return;
  if (status < 0 || rmx__shm_doorbell_drain(ch->seg.bell[ch->seg.side]) != 0) {
    rmx__shm_chan_fail(ch, RMX_EIO, "the doorbell cannot be read");
    return;
  }
  dispatch(ch, !ch->cfg.polling);
}

static int bell_start(rmx_shm_chan_t *ch)
{
  if (!ch->bell_polled) {
    if (uv_poll_init(ch->loop, &ch->bell_poll, ch->seg.bell[ch->seg.side]) != 0)
      return RMX_EIO;
    ch->bell_poll.data = ch;
    ch->bell_polled = 1;
    ch->handles++;
  }
  return uv_poll_start(&ch->bell_poll, UV_READABLE, bell_cb) == 0 ? 0 : RMX_EIO;
}

int rmx__shm_chan_poll(rmx_shm_chan_t *ch)
{
  return up(ch) ? dispatch(ch, !ch->cfg.polling) > 0 : 0;
}

void rmx__shm_chan_set_polling(rmx_shm_chan_t *ch, int polling)
{
  polling = polling != 0;
  if (ch->cfg.polling == polling)
    return;
  ch->cfg.polling = polling;
  if (!up(ch))
    return;
  if (polling) {
    if (ch->bell_polled) /* a flag still armed costs the peer one doorbell */
      uv_poll_stop(&ch->bell_poll);
    return;
  }
  if (bell_start(ch) != 0)
    rmx__shm_chan_fail_later(ch, RMX_EIO, "the doorbell cannot be polled");
  else
    kick(ch); /* arm from the loop */
}

/* ---- liveness: the socket after set-up ---- */

/* The peer has gone: what it wrote before is the owner's still, then the end. */
static void peer_gone(rmx_shm_chan_t *ch, int status, const char *why)
{
  read_side(ch, 0);
  rmx__shm_chan_fail(ch, status, why);
}

/* The peer broke one copy's agreement: from the loop, since this may run
 * inside a request's handling. */
static void copy_broken(rmx_shm_chan_t *ch, const char *why)
{
  snprintf(ch->why, sizeof(ch->why), "one copy's agreement: %s", why);
  rmx__shm_chan_fail_later(ch, RMX_EPROTO, ch->why);
}

static void liveness(rmx_shm_chan_t *ch)
{
  uint8_t m[RMX_SHM_MSG];
  uint32_t count;
  int32_t st;
  ssize_t k = rmx__shm_fds_recv(ch->sock, m, sizeof(m), NULL, 0); /* the end comes next */
  if (k == RMX_EAGAIN)
    return;
  if (k == RMX_ECONNRESET) {
    peer_gone(ch, RMX_ECONNRESET, "the peer's socket ended without a bye: its process "
                                  "closed it or died");
    return;
  }
  if (k < 0) {
    rmx__shm_chan_fail(ch, k == RMX_EPROTO ? RMX_EPROTO : RMX_EIO,
                       k == RMX_EPROTO ? "the peer sent fds after set-up"
                                       : "the liveness socket cannot be read");
    return;
  }
  int taken;
  const char *bad = rmx__shm_copy_in(ch, m, k, &taken);
  if (bad)
    copy_broken(ch, bad);
  if (taken)
    return;
  const char *why = rmx__shm_msg_check(m, k, RMX_SHM_BYE_MAGIC, &count, &st, NULL);
  if (why) {
    snprintf(ch->why, sizeof(ch->why), "the peer sent what is no bye after set-up (%s)", why);
    rmx__shm_chan_fail(ch, RMX_EPROTO, ch->why);
    return;
  }
  /* Its last write was published before the bye was sent: the ring must
   * hold exactly what the bye counts. */
  struct iovec span[2];
  if (rmx__shm_ring_peek(&ch->rx, span) < 0 || ch->rx.seen != count) {
    rmx__shm_chan_fail(ch, RMX_EPROTO, "the peer's bye counts bytes its ring does not hold");
    return;
  }
  peer_gone(ch, 0, "the peer closed the channel");
}

static void sock_cb(uv_poll_t *h, int status, int events)
{
  rmx_shm_chan_t *ch = h->data;
  (void)events;
  if (ch->ended || ch->closing)
    return;
  int err = 0;
  socklen_t len = sizeof(err);
  /* libuv reports POLLERR as UV_EBADF: on a Unix socket that is the peer
   * gone with our bytes unread (one copy's messages, say), a loss */
  if (status == UV_EBADF && getsockopt(ch->sock, SOL_SOCKET, SO_ERROR, &err, &len) == 0 &&
      (err == ECONNRESET || err == EPIPE)) {
    if (ch->state == CH_UP)
      peer_gone(ch, RMX_ECONNRESET, "the peer's socket ended without a bye: its process "
                                    "closed it or died");
    else
      rmx__shm_chan_fail(ch, RMX_ECONNRESET, "the peer closed its socket during set-up");
  } else if (status < 0) {
    snprintf(ch->why, sizeof(ch->why), "polling the socket with %s failed: %s", ch->name,
             uv_strerror(status));
    rmx__shm_chan_fail(ch, RMX_EIO, ch->why);
  } else if (ch->state == CH_UP) {
    liveness(ch);
  } else {
    rmx__shm_chan_setup_input(ch);
  }
}

/* ---- one copy (chan_copy.c has the agreement) ---- */

/* Take the agreement's messages the socket holds, and nothing after them. */
static void copy_sync(rmx_shm_chan_t *ch)
{
  uint8_t m[RMX_SHM_MSG];
  while (!ch->ended && ch->copy.theirs < 0) {
    ssize_t k;
    do
      k = recv(ch->sock, m, sizeof(m), MSG_PEEK | MSG_DONTWAIT);
    while (k < 0 && errno == EINTR);
    if (k != (ssize_t)sizeof(m))
      return;
    uint32_t magic = rmx_get32(m);
    if (magic != RMX_SHM_OFFER_MAGIC && magic != RMX_SHM_VERDICT_MAGIC)
      return; /* a bye, say: the socket's callback takes it */
    int taken;
    const char *bad = rmx__shm_copy_in(ch, m, rmx__shm_fds_recv(ch->sock, m, sizeof(m), NULL, 0),
                                       &taken);
    if (bad || !taken) {
      if (bad)
        copy_broken(ch, bad);
      return;
    }
  }
}

int rmx__shm_chan_direct(rmx_shm_chan_t *ch, int sync)
{
  if (!up(ch) || !ch->copy.offered)
    return 0;
  if (sync)
    copy_sync(ch);
  return !ch->late_status && rmx__shm_copy_agreed(ch);
}

/* Has the peer ended the connection (closed or shut down its socket)?
 * The kernel says so at once, whatever the peer's loop is doing. */
static int peer_ended(const rmx_shm_chan_t *ch)
{
  struct pollfd p = {.fd = ch->sock, .events = POLLIN | POLLRDHUP};
  int n;
  do
    n = poll(&p, 1, 0);
  while (n < 0 && errno == EINTR);
  return n < 0 || (n > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)));
}

int rmx__shm_chan_pull(rmx_shm_chan_t *ch, void *local, uint64_t remote, size_t len)
{
  if (!rmx__shm_chan_direct(ch, 1))
    return RMX_EPROTO;
#if UINTPTR_MAX < UINT64_MAX
  if (remote > UINTPTR_MAX)
    return RMX_EINVAL;
#endif
  if (peer_ended(ch))
    return RMX_ECONNRESET;
  struct iovec l = {.iov_base = local, .iov_len = len};
  struct iovec r = {.iov_base = (void *)(uintptr_t)remote, .iov_len = len};
  int rc = rmx__shm_cma_copy(ch->copy.pid, RMX_SHM_CMA_READ, &l, 1, &r, 1, NULL);
  return peer_ended(ch) ? RMX_ECONNRESET : rc; /* failed or not, across its end */
}

/* ---- set-up's frame ---- */

static void timer_cb(uv_timer_t *h)
{
  rmx_shm_chan_t *ch = h->data;
  snprintf(ch->why, sizeof(ch->why), "set-up with %s took longer than %u ms (%s)", ch->name,
           ch->cfg.handshake_ms,
           ch->state == CH_WAIT_ANSWER ? "no answer from the connector" : "no hello from the listener");
  rmx__shm_chan_fail(ch, RMX_ETIMEDOUT, ch->why);
}

void rmx__shm_chan_start(rmx_shm_chan_t *ch, uv_loop_t *loop, int sock,
                         const rmx_shm_chan_cfg_t *cfg, const rmx_shm_chan_cbs_t *cbs)
{
  void *data = ch->data;
  memset(ch, 0, sizeof(*ch));
  ch->data = data;
  ch->loop = loop;
  ch->cbs = *cbs;
  if (cfg)
    ch->cfg = *cfg;
  if (ch->cfg.handshake_ms == 0)
    ch->cfg.handshake_ms = RMX_SHM_HANDSHAKE_MS;
  ch->cfg.polling = ch->cfg.polling != 0;
  ch->sock = sock;
  ch->seg.memfd = ch->seg.bell[0] = ch->seg.bell[1] = -1;
  uv_timer_init(loop, &ch->timer);
  uv_idle_init(loop, &ch->kick);
  ch->timer.data = ch->kick.data = ch;
  ch->handles = 2;
  uv_timer_start(&ch->timer, timer_cb, ch->cfg.handshake_ms, 0);
  if (sock < 0)
    return;
  if (uv_poll_init(loop, &ch->sock_poll, sock) != 0) {
    rmx__shm_chan_fail_later(ch, RMX_EIO, "the socket cannot be polled");
    return;
  }
  ch->sock_poll.data = ch;
  ch->sock_polled = 1;
  ch->handles++;
  uv_poll_start(&ch->sock_poll, UV_READABLE | UV_DISCONNECT, sock_cb);
}

void rmx__shm_chan_up(rmx_shm_chan_t *ch)
{
  rmx__shm_seg_rings(&ch->seg, &ch->tx, &ch->rx);
  /* the mapping stays; the memfd's fd is of no more use */
  close(ch->seg.memfd);
  ch->seg.memfd = -1;
  uv_timer_stop(&ch->timer);
  ch->state = CH_UP;
  if (!ch->cfg.polling && bell_start(ch) != 0) {
    rmx__shm_chan_fail(ch, RMX_EIO, "the doorbell cannot be polled");
    return;
  }
  ch->cbs.ready(ch);
  if (up(ch))
    rmx__shm_copy_up(ch);
  if (up(ch)) /* what the peer wrote before we were ready rang no doorbell */
    dispatch(ch, !ch->cfg.polling);
  stay_eager(ch);
}

/* ---- data ---- */

ssize_t rmx__shm_chan_write(rmx_shm_chan_t *ch, const struct iovec *iov, int n)
{
  if (!up(ch) || ch->said_bye)
    return RMX_ENOTCONN;
  if (n < 0 || (n > 0 && iov == NULL))
    return RMX_EINVAL;
  size_t total = 0;
  for (int i = 0; i < n; i++)
    total = iov[i].iov_len > SIZE_MAX - total ? SIZE_MAX : total + iov[i].iov_len;
  ssize_t k = rmx__shm_ring_write(&ch->tx, iov, n);
  if (k < 0) {
    if (k == RMX_EPROTO)
      rmx__shm_chan_fail_later(ch, RMX_EPROTO, WHY_TX);
    return k;
  }
  if ((size_t)k == total) {
    ch->want_wr = 0;
    return k;
  }
  ch->want_wr = 1;
  if (!ch->cfg.polling) {
    ssize_t a = rmx__shm_ring_arm_write(&ch->tx);
    if (a < 0)
      rmx__shm_chan_fail_later(ch, RMX_EPROTO, WHY_TX);
    else if (a > 0)
      kick(ch); /* room came meanwhile: writable from the loop */
  }
  return k;
}

static int can_read(const rmx_shm_chan_t *ch)
{
  return ch->rx.data != NULL && !ch->closing;
}

ssize_t rmx__shm_chan_peek(rmx_shm_chan_t *ch, struct iovec span[2])
{
  if (!can_read(ch))
    return RMX_ENOTCONN;
  ssize_t k = rmx__shm_ring_peek(&ch->rx, span);
  if (k == RMX_EPROTO)
    rmx__shm_chan_fail_later(ch, RMX_EPROTO, WHY_RX);
  return k;
}

int rmx__shm_chan_copy(rmx_shm_chan_t *ch, size_t off, void *dst, size_t n)
{
  return can_read(ch) ? rmx__shm_ring_copy(&ch->rx, off, dst, n) : RMX_ENOTCONN;
}

int rmx__shm_chan_consume(rmx_shm_chan_t *ch, size_t n)
{
  if (!can_read(ch))
    return RMX_ENOTCONN;
  int rc = rmx__shm_ring_consume(&ch->rx, n);
  if (rc == RMX_EPROTO)
    rmx__shm_chan_fail_later(ch, RMX_EPROTO, WHY_RX);
  return rc;
}

/* ---- close ---- */

static void handle_closed(uv_handle_t *h)
{
  rmx_shm_chan_t *ch = h->data;
  if (--ch->handles != 0)
    return;
  if (ch->sock >= 0)
    close(ch->sock);
  ch->sock = -1;
  if (ch->has_seg)
    rmx__shm_seg_close(&ch->seg);
  ch->has_seg = 0; /* tx and rx keep their counters; closing keeps them from use */
  if (!ch->ended) { /* a failure found inside a call and not yet raised is the cause */
    ch->ended = 1;
    ch->cbs.end(ch, ch->late_status ? ch->late_status : RMX_ECANCELED,
                ch->late_status ? ch->late_why : "closed by its owner before it ended");
  }
  ch->cbs.closed(ch);
}

/* Everything we wrote is published in the ring before this send: the peer
 * reads it all, then ends. A bye that does not fit (nothing else uses the
 * socket: it always does) leaves the peer an end without a bye,
 * RMX_ECONNRESET. Once. */
static void say_bye(rmx_shm_chan_t *ch)
{
  if (ch->state != CH_UP || ch->late_status || ch->said_bye)
    return;
  ch->said_bye = 1;
  uint8_t m[RMX_SHM_MSG];
  rmx__shm_msg_put(m, RMX_SHM_BYE_MAGIC, ch->tx.pos, 0, NULL);
  (void)rmx__shm_fds_send(ch->sock, m, sizeof(m), NULL, 0);
}

void rmx__shm_chan_cut(rmx_shm_chan_t *ch)
{
  if (ch->closing || ch->ended)
    return; /* the socket is shut already */
  say_bye(ch);
  ch->said_bye = 1;
  if (ch->sock >= 0)
    shutdown(ch->sock, SHUT_WR);
}

void rmx__shm_chan_close(rmx_shm_chan_t *ch)
{
  if (ch->closing)
    return;
  ch->closing = 1;
  say_bye(ch);
  if (ch->sock >= 0)
    shutdown(ch->sock, SHUT_RDWR);
  uv_close((uv_handle_t *)&ch->timer, handle_closed);
  uv_close((uv_handle_t *)&ch->kick, handle_closed);
  if (ch->sock_polled)
    uv_close((uv_handle_t *)&ch->sock_poll, handle_closed);
  if (ch->bell_polled)
    uv_close((uv_handle_t *)&ch->bell_poll, handle_closed);
}
