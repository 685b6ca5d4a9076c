/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Setting a shared-memory channel up (chan.h): the Unix-domain listener,
 * the connector, and the hello and answer between them, all non-blocking
 * on the loop. Every message the peer sends is taken whole or refused
 * (a short one, a long one, wrong fds) with a reason for the log.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <rmx/rmx.h>

#include "../../src/base/bytes.h"
#include "chan.h"

static int boot_id(const rmx_shm_chan_t *ch, char out[RMX_SHM_BOOT_ID_LEN + 1])
{
  return ch->cfg.boot_id_path ? rmx__shm_boot_id_at(ch->cfg.boot_id_path, out)
                              : rmx__shm_boot_id(out);
}

/* ---- names ---- */

static int addr_of(const char *name, struct sockaddr_un *sa, socklen_t *len)
{
  size_t n = name ? strlen(name) : 0;
  if (n == 0 || n > RMX_SHM_NAME_MAX || (name[0] == '@' && n == 1))
    return RMX_EINVAL;
  memset(sa, 0, sizeof(*sa));
  sa->sun_family = AF_UNIX;
  if (name[0] == '@') { /* abstract: a NUL, then the name, no NUL after */
    memcpy(sa->sun_path + 1, name + 1, n - 1);
    *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
  } else {
    memcpy(sa->sun_path, name, n);
    *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
  }
  return 0;
}

static int sys_err(int e)
{
  switch (e) {
  case EADDRINUSE: return RMX_EADDRINUSE;
  case EACCES: case EPERM: case EROFS: return RMX_EACCES;
  case ENOENT: case ENOTDIR: return RMX_ENOENT;
  case EMFILE: case ENFILE: return RMX_EMFILE;
  case ENOMEM: case ENOBUFS: return RMX_ENOMEM;
  case EAGAIN: return RMX_EAGAIN;
  default: return RMX_EIO;
  }
}

static int cbs_ok(const rmx_shm_chan_cbs_t *c)
{
  return c && c->ready && c->readable && c->writable && c->end && c->closed;
}

/* ---- the listener ---- */

static void lst_cb(uv_poll_t *h, int status, int events)
{
  rmx_shm_listener_t *l = h->data;
  (void)status, (void)events; /* an error shows in the owner's accept */
  l->incoming(l);
}

int rmx__shm_listen(rmx_shm_listener_t *l, uv_loop_t *loop, const char *name,
                    void (*incoming)(rmx_shm_listener_t *l))
{
  struct sockaddr_un sa;
  socklen_t len;
  void *data = l->data;
  if (!incoming || addr_of(name, &sa, &len) != 0)
    return RMX_EINVAL;
  memset(l, 0, sizeof(*l));
  l->data = data;
  l->loop = loop;
  l->incoming = incoming;
  l->unlink_path = name[0] != '@';
  strcpy(l->name, name);
  int rc = rmx__shm_listen_fd(name, &l->fd);
  if (rc)
    return rc;
  if (uv_poll_init(loop, &l->poll, l->fd) != 0) {
    rmx__shm_unlisten_fd(name, l->fd);
    l->fd = -1;
    return RMX_EIO;
  }
  l->poll.data = l;
  uv_poll_start(&l->poll, UV_READABLE, lst_cb);
  return 0;
}

int rmx__shm_listen_fd(const char *name, int *fd)
{
  struct sockaddr_un sa;
  socklen_t len;
  if (addr_of(name, &sa, &len) != 0)
    return RMX_EINVAL;
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s < 0)
    return sys_err(errno);
  if (bind(s, (struct sockaddr *)&sa, len) != 0) {
    int rc = sys_err(errno);
    close(s);
    return rc;
  }
  if (listen(s, SOMAXCONN) != 0) {
    int rc = sys_err(errno);
    rmx__shm_unlisten_fd(name, s);
    return rc;
  }
  *fd = s;
  return 0;
}

void rmx__shm_unlisten_fd(const char *name, int fd)
{
  if (name[0] != '@')
    unlink(name);
  close(fd);
}

int rmx__shm_listener_pause(rmx_shm_listener_t *l, int pause)
{
  int r = pause ? uv_poll_stop(&l->poll) : uv_poll_start(&l->poll, UV_READABLE, lst_cb);
  return r == 0 ? 0 : RMX_EIO;
}

static void lst_closed(uv_handle_t *h)
{
  rmx_shm_listener_t *l = h->data;
  close(l->fd);
  l->fd = -1;
  if (l->closed)
    l->closed(l);
}

void rmx__shm_listener_close(rmx_shm_listener_t *l, void (*closed)(rmx_shm_listener_t *l))
{
  l->closed = closed;
  if (l->unlink_path)
    unlink(l->name); /* at once: the name may be listened on again */
  l->unlink_path = 0;
  /* Refused from now on, as a closed TCP listener's port: the socket
   * itself closes with its poll handle, from the loop. */
  shutdown(l->fd, SHUT_RDWR);
  uv_close((uv_handle_t *)&l->poll, lst_closed);
}

/* ---- the accepting side: create, send the hello, take the answer ---- */

static void send_hello(rmx_shm_chan_t *ch)
{
  char id[RMX_SHM_BOOT_ID_LEN + 1];
  uint8_t m[RMX_SHM_MSG];
  int fds[RMX_SHM_NFDS];
  int rc = rmx__shm_seg_create(&ch->seg, ch->cfg.ring_size);
  if (rc != 0) {
    rmx__shm_chan_fail_later(ch, rc, "the segment cannot be created");
    return;
  }
  ch->has_seg = 1;
  if ((rc = boot_id(ch, id)) != 0) {
    rmx__shm_chan_fail_later(ch, rc, "this host's boot id cannot be read");
    return;
  }
  /* the hello's status field carries the listener's features */
  rmx__shm_msg_put(m, RMX_SHM_HELLO_MAGIC, ch->seg.lay.ring_size,
                   ch->cfg.copy ? (int32_t)RMX_SHM_FEAT_COPY : 0, id);
  rmx__shm_seg_fds(&ch->seg, fds);
  /* a socket just accepted has all its buffer free: it takes the hello */
  ssize_t k = rmx__shm_fds_send(ch->sock, m, sizeof(m), fds, RMX_SHM_NFDS);
  if (k != (ssize_t)sizeof(m)) {
    rmx__shm_chan_fail_later(ch, k == RMX_ECONNRESET ? RMX_ECONNRESET : RMX_EIO,
                             "the hello cannot be sent (the connector went away?)");
    return;
  }
  ch->state = CH_WAIT_ANSWER;
}

static int accept_cfg_ok(const rmx_shm_chan_cfg_t *cfg, const rmx_shm_chan_cbs_t *cbs)
{
  rmx_shm_layout_t lay;
  return cbs_ok(cbs) && !(cfg && cfg->ring_size && rmx__shm_layout(cfg->ring_size, &lay) != 0);
}

int rmx__shm_accept_fd(int lfd, int *fd)
{
  int s;
  do
    s = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
  while (s < 0 && errno == EINTR);
  if (s < 0)
    return errno == EWOULDBLOCK || errno == ECONNABORTED ? RMX_EAGAIN : sys_err(errno);
  *fd = s;
  return 0;
}

int rmx__shm_chan_accept(rmx_shm_chan_t *ch, rmx_shm_listener_t *l,
                         const rmx_shm_chan_cfg_t *cfg, const rmx_shm_chan_cbs_t *cbs)
{
  int fd, rc;
  if (!accept_cfg_ok(cfg, cbs))
    return RMX_EINVAL;
  if ((rc = rmx__shm_accept_fd(l->fd, &fd)) != 0)
    return rc;
  rmx__shm_chan_start(ch, l->loop, fd, cfg, cbs);
  strcpy(ch->name, l->name);
  send_hello(ch);
  return 0;
}

int rmx__shm_chan_accept_fd(rmx_shm_chan_t *ch, uv_loop_t *loop, int fd, const char *name,
                            const rmx_shm_chan_cfg_t *cfg, const rmx_shm_chan_cbs_t *cbs)
{
  if (!accept_cfg_ok(cfg, cbs) || strlen(name) > RMX_SHM_NAME_MAX)
    return RMX_EINVAL;
  rmx__shm_chan_start(ch, loop, fd, cfg, cbs);
  strcpy(ch->name, name);
  send_hello(ch);
  return 0;
}

static void answer_in(rmx_shm_chan_t *ch)
{
  uint8_t m[RMX_SHM_MSG];
  char id[RMX_SHM_BOOT_ID_LEN + 1], own[RMX_SHM_BOOT_ID_LEN + 1];
  uint32_t word;
  int32_t st;
  /* The answer alone: a connector that closes at once sends its bye right
   * after it, and a stream socket may hand both to one read. What follows
   * the answer is the liveness socket's to read. */
  ssize_t k = rmx__shm_fds_recv(ch->sock, m, sizeof(m), NULL, 0);
  if (k == RMX_EAGAIN)
    return;
  const char *why = k == RMX_ECONNRESET ? "the connector closed before it answered"
                    : k == RMX_EPROTO   ? "the connector's answer carried fds"
                    : k < 0             ? "the connector's answer cannot be read"
                                        : rmx__shm_msg_check(m, k, RMX_SHM_ANSWER_MAGIC, &word,
                                                             &st, id);
  if (why) {
    rmx__shm_chan_fail(ch, k == RMX_ECONNRESET ? RMX_ECONNRESET : k < 0 && k != RMX_EPROTO
                                                                      ? RMX_EIO : RMX_EPROTO,
                       why);
    return;
  }
  if (st != 0) {
    snprintf(ch->why, sizeof(ch->why), "the connector refused the segment: %s",
             rmx_strerror(st));
    rmx__shm_chan_fail(ch, RMX_ECONNREFUSED, ch->why);
    return;
  }
  ch->copy.offered = ch->cfg.copy && (word & RMX_SHM_FEAT_COPY); /* the features both have */
  int rc = boot_id(ch, own);
  if (rc != 0 || strcmp(own, id) != 0) {
    rmx__shm_chan_fail(ch, rc ? rc : RMX_EADDRNOTAVAIL,
                       rc ? "this host's boot id cannot be read"
                          : "the connector runs under another kernel (its boot id is not ours)");
    return;
  }
  rmx__shm_chan_up(ch);
}

/* ---- the connecting side: check the hello, attach, answer ---- */

int rmx__shm_chan_connect(rmx_shm_chan_t *ch, uv_loop_t *loop, const char *name,
                          const rmx_shm_chan_cfg_t *cfg, const rmx_shm_chan_cbs_t *cbs)
{
  struct sockaddr_un sa;
  socklen_t len;
  if (!cbs_ok(cbs) || addr_of(name, &sa, &len) != 0)
    return RMX_EINVAL;
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), e = errno;
  rmx__shm_chan_start(ch, loop, fd, cfg, cbs);
  strcpy(ch->name, name);
  if (fd < 0) {
    snprintf(ch->why, sizeof(ch->why), "no socket for %s: %s", name, strerror(e));
    rmx__shm_chan_fail_later(ch, sys_err(e), ch->why);
    return 0;
  }
  ch->state = CH_WAIT_HELLO;
  int r;
  do
    r = connect(fd, (struct sockaddr *)&sa, len);
  while (r < 0 && errno == EINTR);
  if (r == 0 || errno == EINPROGRESS) /* a failure later shows on the socket */
    return 0;
  e = errno;
  int rc = e == ENOENT || e == ECONNREFUSED ? RMX_ECONNREFUSED
           : e == EAGAIN                    ? RMX_EAGAIN
                                            : sys_err(e);
  snprintf(ch->why, sizeof(ch->why), "%s %s: %s", e == EAGAIN ? "the backlog is full at" :
           rc == RMX_ECONNREFUSED ? "nobody listens at" : "cannot connect to", name,
           strerror(e));
  rmx__shm_chan_fail_later(ch, rc, ch->why);
  return 0;
}

int rmx__shm_sock_connect(const char *name, int *fd)
{
  struct sockaddr_un sa;
  socklen_t len;
  int r;
  if (addr_of(name, &sa, &len) != 0)
    return RMX_EINVAL;
  if ((*fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) < 0)
    return sys_err(errno);
  do
    r = connect(*fd, (struct sockaddr *)&sa, len);
  while (r < 0 && errno == EINTR);
  if (r == 0 || errno == EINPROGRESS)
    return 0;
  int e = errno;
  close(*fd);
  *fd = -1;
  return e == ENOENT || e == ECONNREFUSED ? RMX_ECONNREFUSED : e == EAGAIN ? RMX_EAGAIN
                                                                          : sys_err(e);
}

int rmx__shm_chan_connect_fd(rmx_shm_chan_t *ch, uv_loop_t *loop, int fd, const char *name,
                             const rmx_shm_chan_cfg_t *cfg, const rmx_shm_chan_cbs_t *cbs)
{
  if (!cbs_ok(cbs) || strlen(name) > RMX_SHM_NAME_MAX)
    return RMX_EINVAL;
  rmx__shm_chan_start(ch, loop, fd, cfg, cbs);
  strcpy(ch->name, name);
  ch->state = CH_WAIT_HELLO;
  return 0;
}

/* Refuse the hello: the listener is told why (best effort), then we end. */
static void refuse(rmx_shm_chan_t *ch, int status, const char *why)
{
  uint8_t m[RMX_SHM_MSG];
  char id[RMX_SHM_BOOT_ID_LEN + 1];
  if (boot_id(ch, id) != 0) /* the status says enough */
    strcpy(id, "00000000-0000-0000-0000-000000000000");
  rmx__shm_msg_put(m, RMX_SHM_ANSWER_MAGIC, 0, status, id);
  (void)rmx__shm_fds_send(ch->sock, m, sizeof(m), NULL, 0);
  rmx__shm_chan_fail(ch, status, why);
}

static void close_fds(const int *fds, int n)
{
  for (int i = 0; i < n; i++)
    close(fds[i]);
}

static void hello_in(rmx_shm_chan_t *ch)
{
  uint8_t m[RMX_SHM_MSG + 1];
  char id[RMX_SHM_BOOT_ID_LEN + 1], own[RMX_SHM_BOOT_ID_LEN + 1];
  int fds[RMX_SHM_NFDS], rc;
  uint32_t ring;
  int32_t st;
  ssize_t k = rmx__shm_fds_recv(ch->sock, m, sizeof(m), fds, RMX_SHM_NFDS);
  if (k == RMX_EAGAIN)
    return;
  if (k == RMX_EPROTO) { /* what fds came are closed */
    refuse(ch, RMX_EPROTO, "the hello did not carry exactly the segment's three fds");
    return;
  }
  if (k < 0) {
    snprintf(ch->why, sizeof(ch->why), "%s: %s", ch->name,
             k == RMX_ECONNRESET ? "the listener closed before its hello"
                                 : "the hello cannot be read (nobody listens there?)");
    rmx__shm_chan_fail(ch, k == RMX_ECONNRESET ? RMX_ECONNRESET : RMX_ECONNREFUSED, ch->why);
    return;
  }
  const char *why = rmx__shm_msg_check(m, k, RMX_SHM_HELLO_MAGIC, &ring, &st, id);
  if (why) {
    close_fds(fds, RMX_SHM_NFDS);
    refuse(ch, RMX_EPROTO, why);
    return;
  }
  if ((rc = boot_id(ch, own)) != 0) {
    close_fds(fds, RMX_SHM_NFDS);
    refuse(ch, rc, "this host's boot id cannot be read");
    return;
  }
  if (strcmp(own, id) != 0) {
    close_fds(fds, RMX_SHM_NFDS);
    snprintf(ch->why, sizeof(ch->why),
             "the listener at %s runs under another kernel (boot id %s, ours %s): shared "
             "memory needs the same host", ch->name, id, own);
    refuse(ch, RMX_EADDRNOTAVAIL, ch->why);
    return;
  }
  if ((rc = rmx__shm_seg_attach(&ch->seg, fds, &why)) != 0) { /* it took the fds */
    snprintf(ch->why, sizeof(ch->why), "the listener's segment: %s",
             why ? why : "it cannot be mapped");
    refuse(ch, rc, ch->why);
    return;
  }
  ch->has_seg = 1;
  if (ch->seg.lay.ring_size != ring) {
    refuse(ch, RMX_EPROTO, "the hello's ring size is not its segment's");
    return;
  }
  /* the answer's word: the features both have (bits the hello's status
   * set that this side has too) */
  ch->copy.offered = ch->cfg.copy && ((uint32_t)st & RMX_SHM_FEAT_COPY);
  rmx__shm_msg_put(m, RMX_SHM_ANSWER_MAGIC, ch->copy.offered ? RMX_SHM_FEAT_COPY : 0, 0, own);
  if (rmx__shm_fds_send(ch->sock, m, RMX_SHM_MSG, NULL, 0) != RMX_SHM_MSG) {
    rmx__shm_chan_fail(ch, RMX_ECONNRESET, "the answer cannot be sent: the listener went away");
    return;
  }
  rmx__shm_chan_up(ch);
}

void rmx__shm_chan_setup_input(rmx_shm_chan_t *ch)
{
  if (ch->state == CH_WAIT_HELLO)
    hello_in(ch);
  else if (ch->state == CH_WAIT_ANSWER)
    answer_in(ch);
  /* else a failure of the start is on its way from the loop */
}
