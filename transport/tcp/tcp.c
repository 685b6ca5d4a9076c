/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The TCP transport: rmx frames over libuv streams, plus frames that carry
 * remote reads, writes and atomics, which the target serves from its
 * registered memory (target.c). This file is the instance: listeners and
 * the sockets they accept, registrations, the instance's lifetime and the
 * ops table. tcp.h says how the other files stack up.
 */
#include <errno.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tcp.h"

#define tp_unlive rmx__tcp_unlive

/* ---- listening ---- */

#define ACCEPT_BATCH 64     /* peers taken per wake-up: the loop's other work goes on */
#define ACCEPT_RETRY_MS 200 /* out of descriptors: try again this often (or at a close) */

static void listener_closed(uv_handle_t *h)
{
  rmx_tp_listener_t *l = h->data;
  rmx_tp_t *tp = l->tp;
  if (--l->handles)
    return;
  free(l);
  tp_unlive(tp);
}

/*
 * Accepting. The listener accepts with accept4 itself, on a uv_poll_t
 * watching the listening socket, rather than through uv_listen: on EMFILE
 * libuv 1.44 (uv__server_io) closes its reserve descriptor, accepts every
 * peer waiting in the backlog and closes them at once (they see their
 * connection reset after it was established), and without a reserve it
 * calls back with the error in a loop that never yields. Here, a listener
 * out of descriptors stops watching, logs an error naming the limit, and
 * tries again when one of its connections closes or ACCEPT_RETRY_MS later;
 * the peers wait in the kernel's backlog meanwhile, and the connections
 * already open go on.
 *
 * Bursts of peers: a listener takes a new socket only while fewer than
 * RMX_MAX_HANDSHAKES wait for their hello and the core has not paused it;
 * the rest wait in the backlog and are taken as handshakes end
 * (listener_kick). A peer that never sends its hello is dropped after
 * RMX_HANDSHAKE_TIMEOUT_MS (conn.c).
 */
static int may_take(const rmx_tp_listener_t *l)
{
  return !l->paused && !l->starved && l->npending < l->tp->env->cfg->max_handshakes;
}

static void on_readable(uv_poll_t *p, int status, int events);
static void take(rmx_tp_listener_t *l, int fd);

/* Watch the listening socket exactly while a peer may be taken; a group
 * member's listener takes what it was fed instead. */
static void listener_kick(rmx_tp_listener_t *l)
{
  if (l->kick) { /* a listener of another medium (shm's) */
    l->kick(l);
    return;
  }
  while (l->member && l->nfed && may_take(l)) {
    tcp_raw_t *r = rmx_container_of(rmx_list_pop(&l->fed), tcp_raw_t, raw.link);
    int fd = r->fd;
    l->nfed--;
    free(r);
    take(l, fd);
  }
  int want = !l->member && may_take(l);
  if (want == l->polling)
    return;
  if (want ? uv_poll_start(&l->poll, UV_READABLE, on_readable) == 0
           : uv_poll_stop(&l->poll) == 0)
    l->polling = (uint8_t)want;
}

static void retry_cb(uv_timer_t *t)
{
  rmx_tp_listener_t *l = t->data;
  l->starved = 0;
  listener_kick(l);
}

/* A connection closed: a descriptor is free, a starved listener tries. */
static void listeners_fd_free(rmx_tp_t *tp)
{
  rmx_list_t *n;
  rmx_list_foreach(n, &tp->listeners) {
    rmx_tp_listener_t *l = rmx_container_of(n, rmx_tp_listener_t, tp_link);
    if (l->starved) {
      uv_timer_stop(&l->retry);
      retry_cb(&l->retry);
    }
  }
}

static void starve(rmx_tp_listener_t *l, int err)
{
  rmx_tp_t *tp = l->tp;
  struct rlimit rl = {0, 0};
  getrlimit(RLIMIT_NOFILE, &rl);
  l->starved = 1;
  listener_kick(l);
  uv_timer_start(&l->retry, retry_cb, ACCEPT_RETRY_MS, 0);
  /* A flood of peers repeats this at will. */
  if (err == EMFILE)
    RMX_TP_LOG_LIMITED(tp->env, &tp->rl_accept, uv_now(tp->loop), ERROR,
                       "tcp: cannot accept: out of file descriptors (RLIMIT_NOFILE %llu, "
                       "%u connections here); new peers wait in the listen backlog until "
                       "descriptors free up",
                       (unsigned long long)rl.rlim_cur, tp->nconns);
  else
    RMX_TP_LOG_LIMITED(tp->env, &tp->rl_accept, uv_now(tp->loop), ERROR,
                       "tcp: cannot accept: %s%s; new peers wait in the listen backlog",
                       strerror(err),
                       err == ENFILE ? " (the system's limit, fs.file-max)" : "");
}

static void take(rmx_tp_listener_t *l, int fd)
{
  rmx_tp_conn_t *tc = rmx__tcp_conn_new(l->tp, 1);
  if (!tc) {
    close(fd);
    starve(l, ENOMEM);
    return;
  }
  tc->state = TC_WAIT_HELLO;
  if (uv_tcp_open(&tc->h, fd) != 0) {
    close(fd);
    rmx__tcp_conn_close(tc);
    return;
  }
  rmx__tcp_sock_opts(tc);
  tc->lst = l;
  l->npending++;
  rmx_list_push(&l->pending, &tc->lst_link);
  if (rmx__tcp_read_start(tc) != 0)
    rmx__tcp_conn_close(tc);
}

static void on_readable(uv_poll_t *p, int status, int events)
{
  rmx_tp_listener_t *l = p->data;
  uv_os_fd_t lfd;
  (void)events;
  if (status || uv_fileno((uv_handle_t *)&l->h, &lfd) != 0) {
    starve(l, status ? -status : EBADF);
    return;
  }
  for (int i = 0; i < ACCEPT_BATCH && may_take(l); i++) {
    int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      take(l, fd);
      continue;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK)
      break;
    if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO)
      continue; /* that peer gave up: the next one */
    starve(l, errno); /* EMFILE, ENFILE, ENOBUFS, ENOMEM, ... */
    return;
  }
  listener_kick(l);
}

static void tcp_listen_pause(rmx_tp_listener_t *l, int pause)
{
  l->paused = (uint8_t)(pause != 0);
  listener_kick(l);
}

/* A group member's listener: peers come from the gate (gate.c), and wait
 * here as they would in the backlog, TCP_FED_MAX at most. */
void rmx__tcp_feed(rmx_tp_listener_t *l, rmx_tp_raw_t *raw)
{
  tcp_raw_t *r = rmx_container_of(raw, tcp_raw_t, raw);
  if (l->nfed >= TCP_FED_MAX) {
    RMX_TP_LOG_LIMITED(l->tp->env, &l->tp->rl_handshakes, uv_now(l->tp->loop), WARN,
                       "%s: dropping a peer of the group: %u already wait here", l->tp->name,
                       l->nfed);
    rmx__tcp_gate_drop(raw);
    return;
  }
  rmx_list_push(&l->fed, &r->raw.link);
  l->nfed++;
  listener_kick(l);
}

rmx_tp_raw_t *rmx__tcp_unfeed(rmx_tp_listener_t *l)
{
  rmx_list_t *n = rmx_list_pop(&l->fed);
  if (!n)
    return NULL;
  l->nfed--;
  return rmx_container_of(n, rmx_tp_raw_t, link);
}

static int tcp_listen(rmx_tp_t *tp, const struct sockaddr *sa, void *owner,
                      rmx_tp_listener_t **out)
{
  char addr[80];
  uv_os_fd_t fd = -1;
  rmx_tp_listener_t *l = calloc(1, sizeof(*l));
  if (!l)
    return RMX_ENOMEM;
  l->tp = tp;
  l->owner = owner;
  rmx_list_init(&l->pending);
  rmx_list_init(&l->fed);
  if (!sa) {
    l->member = 1;
    uv_timer_init(tp->loop, &l->retry);
    l->retry.data = l;
    l->handles = 1;
    tp->live++;
    rmx_list_push(&tp->listeners, &l->tp_link);
    *out = l;
    return 0;
  }
  /* The socket is bound and listening before libuv sees it: a taken
   * address fails here (gate.c says why uv_tcp_bind cannot be used). */
  const char *step = "";
  int rc = rmx__tcp_listen_fd(sa, &fd, &step);
  if (rc) {
    int err = rmx__uv_err(uv_translate_sys_error(-rc));
    RMX_TP_LOG(tp->env, ERROR, "tcp: cannot listen on %s: %s failed: %s%s",
               rmx__sa_str(sa, addr, sizeof(addr)), step, strerror(-rc), rmx__listen_hint(err));
    free(l);
    return err;
  }
  uv_tcp_init(tp->loop, &l->h);
  uv_timer_init(tp->loop, &l->retry);
  l->h.data = l->poll.data = l->retry.data = l;
  l->handles = 2;
  tp->live++;
  if ((rc = uv_tcp_open(&l->h, fd)) != 0)
    close(fd); /* not the handle's: uv_close leaves it */
  if (rc == 0 && (rc = uv_poll_init_socket(tp->loop, &l->poll, fd)) == 0)
    l->handles++;
  if (rc) {
    RMX_TP_LOG(tp->env, ERROR, "tcp: cannot listen on %s: %s", rmx__sa_str(sa, addr, sizeof(addr)),
               uv_strerror(rc));
    uv_close((uv_handle_t *)&l->retry, listener_closed);
    uv_close((uv_handle_t *)&l->h, listener_closed);
    return rmx__uv_err(rc);
  }
  rmx_list_push(&tp->listeners, &l->tp_link);
  listener_kick(l);
  *out = l;
  return 0;
}

static int tcp_listen_addr(rmx_tp_listener_t *l, struct sockaddr_storage *ss)
{
  int len = sizeof(*ss);
  return rmx__uv_err(uv_tcp_getsockname(&l->h, (struct sockaddr *)ss, &len));
}

static int tcp_peer_addr(rmx_tp_conn_t *tc, struct sockaddr_storage *ss)
{
  int len = sizeof(*ss);
  return rmx__uv_err(uv_tcp_getpeername(&tc->h, (struct sockaddr *)ss, &len));
}

static int tcp_local_addr(rmx_tp_conn_t *tc, struct sockaddr_storage *ss)
{
  int len = sizeof(*ss);
  return rmx__uv_err(uv_tcp_getsockname(&tc->h, (struct sockaddr *)ss, &len));
}

static void tcp_listen_close(rmx_tp_listener_t *l)
{
  rmx_list_t *n;
  l->paused = 1; /* no socket is taken while the pending ones close */
  rmx_list_del(&l->tp_link);
  while ((n = l->pending.next) != &l->pending)
    rmx__tcp_conn_close(rmx_container_of(n, rmx_tp_conn_t, lst_link));
  rmx_tp_raw_t *r;
  while ((r = rmx__tcp_unfeed(l)) != NULL)
    rmx__tcp_gate_drop(r);
  if (l->member) {
    uv_close((uv_handle_t *)&l->retry, listener_closed);
    return;
  }
  uv_close((uv_handle_t *)&l->poll, listener_closed); /* before the socket it watches */
  uv_close((uv_handle_t *)&l->retry, listener_closed);
  uv_close((uv_handle_t *)&l->h, listener_closed);
}

/* ---- memory ---- */

int rmx__tcp_mem_reg(rmx_tp_t *tp, void *addr, size_t len, unsigned access,
                       rmx_tp_conn_t *scope, rmx_tp_mem_t **out)
{
  rmx_tp_mem_t *m = calloc(1, sizeof(*m));
  if (!m)
    return RMX_ENOMEM;
  /* 64 bits from the kernel's random source for every registration: a
   * key tells nothing about any other, and guessing one is hopeless. */
  do {
    if (getrandom(&m->key, sizeof(m->key), 0) != sizeof(m->key)) {
      RMX_TP_LOG(tp->env, ERROR, "tcp: no randomness for a memory key");
      free(m);
      return RMX_EIO;
    }
  } while (m->key == 0 || rmx__tcp_mem_find(tp, m->key));
  m->tp = tp;
  m->addr = (uintptr_t)addr;
  m->len = len;
  m->access = access;
  m->scope = scope ? scope->serial : 0;
  rmx_list_push(&tp->mem[m->key % MEM_BUCKETS], &m->link);
  *out = m;
  return 0;
}

/* Unreachable at once; freed now or when the last read or write using it
 * stops (they check m->dead and go no further). */
void rmx__tcp_mem_dereg(rmx_tp_mem_t *m)
{
  rmx_list_t *n;
  rmx_list_del(&m->link);
  m->dead = 1;
  if (m->uses == 0) {
    free(m);
    return;
  }
  rmx_list_foreach(n, &m->tp->conns) {
    rmx_tp_conn_t *tc = rmx_container_of(n, rmx_tp_conn_t, tp_link);
    if (rmx__tcp_sends_from(tc, m))
      rmx__tcp_cut_writes(tc);
  }
}

uint64_t rmx__tcp_mem_rkey(const rmx_tp_mem_t *m) { return m->key; }

/* A capability: the key is already unguessable, so opening only lets the
 * target accept it from any connection. */
int rmx__tcp_mem_open(rmx_tp_mem_t *m)
{
  m->open = 1;
  return 0;
}

/* A registration of its own (a key of its own) over the same bytes. */
int rmx__tcp_mem_grant(rmx_tp_mem_t *m, rmx_tp_conn_t *tc, rmx_tp_mem_t **out)
{
  return rmx__tcp_mem_reg(m->tp, (void *)m->addr, m->len, m->access, tc, out);
}

/* ---- instance ---- */

static void conn_closed(rmx_tp_conn_t *tc)
{
  rmx_tp_t *tp = tc->tp;
  rmx__tcp_conn_free(tc);
  listeners_fd_free(tp);
  tp_unlive(tp);
}

/* The files above the stream, as it calls them. */
static const tcp_up_t up = {
  .frame = rmx__tcp_conn_frame,
  .acked = rmx__tcp_conn_acked,
  .resp_written = rmx__tcp_resp_written,
  .closed = conn_closed,
  .slot_free = listener_kick,
};

int rmx__tcp_init_as(const rmx_tp_env_t *env, const tcp_pipe_t *pipe, const char *name,
                     rmx_tp_t **out)
{
  rmx_tp_t *tp = calloc(1, sizeof(*tp));
  if (!tp)
    return RMX_ENOMEM;
  tp->cfg_copy = *env->cfg; /* the instance may outlive the context */
  tp->env_copy = *env;
  tp->env_copy.cfg = &tp->cfg_copy;
  tp->env = &tp->env_copy;
  tp->loop = env->loop;
  tp->up = &up;
  tp->pipe = pipe;
  tp->name = name;
  rmx_list_init(&tp->free_w);
  rmx_list_init(&tp->free_rd);
  rmx_list_init(&tp->free_srv);
  rmx_list_init(&tp->conns);
  rmx_list_init(&tp->listeners);
  for (int i = 0; i < MEM_BUCKETS; i++)
    rmx_list_init(&tp->mem[i]);
  rmx_list_init(&tp->laterq);
  uv_idle_init(tp->loop, &tp->later);
  tp->later.data = tp;
  tp->live++; /* the handle */
  *out = tp;
  return 0;
}

static int tcp_init(const rmx_tp_env_t *env, rmx_tp_t **out)
{
  return rmx__tcp_init_as(env, &rmx__tcp_sock_pipe, "tcp", out);
}

static void tp_free(rmx_tp_t *tp)
{
  rmx_list_t *n;
  free(tp->by_fd);
  while ((n = rmx_list_pop(&tp->free_w)) != NULL)
    free(rmx_container_of(n, wreq_t, link));
  while ((n = rmx_list_pop(&tp->free_rd)) != NULL)
    free(rmx_container_of(n, rd_t, link));
  while ((n = rmx_list_pop(&tp->free_srv)) != NULL)
    free(rmx_container_of(n, srv_t, link));
  for (int i = 0; i < MEM_BUCKETS; i++)
    while ((n = rmx_list_pop(&tp->mem[i])) != NULL) {
      RMX_TP_LOG(tp->env, WARN, "%s: a registration was never released", tp->name);
      free(rmx_container_of(n, rmx_tp_mem_t, link));
    }
  free(tp);
}

void rmx__tcp_unlive(rmx_tp_t *tp)
{
  if (--tp->live == 0 && tp->finishing)
    tp_free(tp);
}

static void later_closed(uv_handle_t *h) { tp_unlive(h->data); }

/* The later handle and sockets still closing (rejected peers) finish on
 * the loop; the instance goes with the last of them. */
void rmx__tcp_fini(rmx_tp_t *tp)
{
  tp->finishing = 1;
  uv_close((uv_handle_t *)&tp->later, later_closed);
}

int rmx__tcp_devices(rmx_device_info_t **out, int *n) { return RMX_ENOTSUP; }

/* Nothing registered for itself; refused: connects out of descriptors. */
void rmx__tcp_stats(rmx_tp_t *tp, rmx_tp_stats_t *st)
{
  st->refused += tp->refused;
  st->direct_bytes += tp->direct_bytes;
}

const rmx_tp_ops_t rmx__tcp_ops = {
  .name = "tcp",
  .flags = RMX_TP_F_LOOP_SPIN,
  .wire_id = 1,
  .init = tcp_init,
  .listen = tcp_listen,
  .listen_addr = tcp_listen_addr,
  .peer_addr = tcp_peer_addr,
  .local_addr = tcp_local_addr,
  .listen_close = tcp_listen_close,
  .listen_pause = tcp_listen_pause,
  .gate_open = rmx__tcp_gate_open,
  .gate_addr = rmx__tcp_gate_addr,
  .gate_take = rmx__tcp_gate_take,
  .gate_give = rmx__tcp_gate_give,
  .gate_drop = rmx__tcp_gate_drop,
  .gate_close = rmx__tcp_gate_close,
  .feed = rmx__tcp_feed,
  .unfeed = rmx__tcp_unfeed,
  .connect = rmx__tcp_connect,
  RMX_TCP_STREAM_OPS,
  .spin = rmx__tcp_spin,
  .poll = rmx__tcp_poll,
};
