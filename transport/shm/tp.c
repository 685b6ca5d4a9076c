/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The shm:// transport's instance: listeners on a Unix-domain socket (a
 * path, or an abstract name), connects, busy-polling the rings, and the
 * ops table. Everything a connection carries is the TCP transport's
 * stream engine over pipe.c; memory registrations and the target's
 * checks are TCP's too (keys of 64 random bits, scoped to a connection).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../src/base/uri.h"
#include "tp.h"

/* ---- names ---- */

int rmx__shm_sa_name(const struct sockaddr *sa, char name[RMX_SHM_NAME_MAX + 1])
{
  const struct sockaddr_un *un = (const void *)sa;
  if (!sa || sa->sa_family != AF_UNIX)
    return RMX_EINVAL;
  const char *p = un->sun_path;
  size_t max = sizeof(un->sun_path);
  if (p[0] == '\0') { /* abstract: "@" and the name (NUL-terminated here) */
    size_t n = strnlen(p + 1, max - 1);
    if (n == 0)
      return RMX_EINVAL;
    name[0] = '@';
    memcpy(name + 1, p + 1, n);
    name[n + 1] = '\0';
    return 0;
  }
  size_t n = strnlen(p, max);
  if (n == 0 || n > RMX_SHM_NAME_MAX)
    return RMX_EINVAL;
  memcpy(name, p, n);
  name[n] = '\0';
  return 0;
}

/* ---- aliases: a listener at an IP address reached over shm ----
 *
 * A listener at tcp://, rdma:// or auto://ADDR:PORT also answers on the
 * abstract name "@rmx-ADDR:PORT" (ADDR as bound, wildcards included), and
 * auto:// reaches a peer there when it is on this host: the name answers
 * (same network namespace), the channel's set-up checks the kernel (boot
 * id), and the process holding the name is of the uid that holds the TCP
 * port (a name is anyone's to take first; a port on a local address is
 * not). docs/architecture.md, "auto:// per peer".
 */

static void alias_name(const struct sockaddr *sa, char name[RMX_SHM_NAME_MAX + 1])
{
  char a[80];
  snprintf(name, RMX_SHM_NAME_MAX + 1, "@rmx-%s", rmx__sa_str(sa, a, sizeof(a)));
}

static uint16_t sa_port(const struct sockaddr *sa)
{
  return ntohs(sa->sa_family == AF_INET ? ((const struct sockaddr_in *)(const void *)sa)->sin_port
                                        : ((const struct sockaddr_in6 *)(const void *)sa)->sin6_port);
}

/* sa's address is this host's (in this network namespace): it binds. */
static int is_local(const struct sockaddr *sa)
{
  struct sockaddr_storage ss;
  socklen_t len = sa->sa_family == AF_INET ? sizeof(struct sockaddr_in)
                                           : sizeof(struct sockaddr_in6);
  memcpy(&ss, sa, len);
  if (ss.ss_family == AF_INET)
    ((struct sockaddr_in *)&ss)->sin_port = 0;
  else
    ((struct sockaddr_in6 *)&ss)->sin6_port = 0;
  int fd = socket(sa->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return 0;
  int ok = bind(fd, (struct sockaddr *)&ss, len) == 0;
  close(fd);
  return ok;
}

/* The uid of the process that listens on TCP port `port` here (from
 * /proc/net/tcp and tcp6, any address), or -1: none, or unreadable. Only
 * the listening sockets are read: the kernel lists them first, so the cost
 * does not grow with the host's connections. */
static long tcp_port_uid(uint16_t port)
{
  static const char *const files[] = {"/proc/net/tcp", "/proc/net/tcp6"};
  char line[512];
  long uid = -1;
  for (int f = 0; f < 2 && uid < 0; f++) {
    FILE *fp = fopen(files[f], "re");
    if (!fp)
      continue;
    while (uid < 0 && fgets(line, sizeof(line), fp)) {
      char local[64];
      unsigned st, p;
      long u;
      /* sl local rem st tx:rx tr:when retrnsmt uid */
      if (sscanf(line, " %*s %63s %*s %x %*s %*s %*s %ld", local, &st, &u) != 3)
        continue; /* the header */
      if (st != 0x0a)
        break; /* the kernel lists listening sockets first: the rest are connections */
      char *colon = strrchr(local, ':');
      if (colon && sscanf(colon + 1, "%x", &p) == 1 && p == port)
        uid = u;
    }
    fclose(fp);
  }
  return uid;
}

/* A connect to the alias of the listener at sa: the names to try, best
 * first; 0 where sa is not an address of this host. */
static int alias_names(const struct sockaddr *sa, char names[3][RMX_SHM_NAME_MAX + 1])
{
  struct sockaddr_in any4 = {.sin_family = AF_INET};
  struct sockaddr_in6 any6 = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_ANY_INIT};
  if ((sa->sa_family != AF_INET && sa->sa_family != AF_INET6) || !is_local(sa))
    return 0;
  any4.sin_port = any6.sin6_port = htons(sa_port(sa));
  int n = 0;
  alias_name(sa, names[n++]);
  if (sa->sa_family == AF_INET)
    alias_name((struct sockaddr *)&any4, names[n++]);
  alias_name((struct sockaddr *)&any6, names[n++]); /* dual-stack: IPv4 peers too */
  return n;
}

/* ---- listening ---- */

static void lst_closed(rmx_shm_listener_t *shl)
{
  rmx_tp_listener_t *l = shl->data;
  rmx_tp_t *tp = l->tp;
  free(shl);
  free(l);
  rmx__tcp_unlive(tp);
}

static int may_take(const rmx_tp_listener_t *l)
{
  return !l->paused && l->npending < l->tp->env->cfg->max_handshakes;
}

/* A peer waiting on l: from its socket (shl), or the one a group's gate
 * fed it (fd >= 0, whose listener's name the socket says). 0, or
 * RMX_EAGAIN when none waits (logged if it is an error). */
static int take(rmx_tp_listener_t *l, int fd)
{
  rmx_tp_t *tp = l->tp;
  rmx_tp_conn_t *tc = rmx__tcp_conn_new(tp, 1);
  shm_pipe_t *p = tc ? rmx__shm_pipe_new(tc) : NULL;
  rmx_shm_chan_cfg_t cfg;
  struct sockaddr_storage ss;
  socklen_t len = sizeof(ss);
  char name[RMX_SHM_NAME_MAX + 1] = "@?";
  int rc = RMX_ENOMEM;
  if (p) {
    rmx__shm_pipe_cfg(tc, &cfg);
    if (fd < 0) {
      rc = rmx__shm_chan_accept(&p->ch, l->shl, &cfg, &rmx__shm_pipe_cbs);
    } else {
      if (getsockname(fd, (struct sockaddr *)&ss, &len) == 0)
        rmx__shm_sa_name((struct sockaddr *)&ss, name);
      rc = rmx__shm_chan_accept_fd(&p->ch, tp->loop, fd, name, &cfg, &rmx__shm_pipe_cbs);
    }
  }
  if (rc) {
    if (tc)
      rmx__tcp_conn_close(tc);
    if (fd >= 0)
      close(fd);
    if (rc != RMX_EAGAIN)
      RMX_TP_LOG_LIMITED(tp->env, &tp->rl_accept, uv_now(tp->loop), ERROR,
                         "shm: cannot accept on %s: %s", l->shl ? l->shl->name : name,
                         rmx_strerror(rc));
    return RMX_EAGAIN;
  }
  rmx__shm_pipe_started(tc);
  tc->state = TC_WAIT_HELLO;
  tc->lst = l;
  l->npending++;
  rmx_list_push(&l->pending, &tc->lst_link);
  return 0;
}

/* Peers wait in the socket's backlog while the listener may take none; a
 * group member's listener takes what it was fed. */
static void listener_kick(rmx_tp_listener_t *l)
{
  while (l->member && l->nfed && may_take(l)) {
    tcp_raw_t *r = rmx_container_of(rmx__tcp_unfeed(l), tcp_raw_t, raw);
    int fd = r->fd;
    free(r);
    take(l, fd);
  }
  int want = may_take(l);
  if (!l->member && want != l->polling && rmx__shm_listener_pause(l->shl, !want) == 0)
    l->polling = (uint8_t)want;
}

static void incoming(rmx_shm_listener_t *shl)
{
  rmx_tp_listener_t *l = shl->data;
  while (may_take(l) && take(l, -1) == 0)
    ;
  listener_kick(l);
}

/* ---- listener groups: the gate is a Unix socket no loop owns ---- */

typedef struct shm_gate {
  int fd;
  char name[RMX_SHM_NAME_MAX + 1];
} shm_gate_t;

static shm_gate_t *gate_of(rmx_tp_gate_t *g) { return (shm_gate_t *)(void *)g; }

static int shm_gate_open(const struct sockaddr *sa, rmx_tp_gate_t **out, int *fd)
{
  shm_gate_t *g = malloc(sizeof(*g));
  if (!g)
    return RMX_ENOMEM;
  int rc = rmx__shm_sa_name(sa, g->name);
  if (rc == 0)
    rc = rmx__shm_listen_fd(g->name, &g->fd);
  if (rc) {
    free(g);
    return rc;
  }
  *fd = g->fd;
  *out = (rmx_tp_gate_t *)(void *)g;
  return 0;
}

static int shm_gate_addr(rmx_tp_gate_t *g, struct sockaddr_storage *ss)
{
  return rmx__uri_unix(gate_of(g)->name, ss);
}

static int shm_gate_take(rmx_tp_gate_t *g, rmx_tp_raw_t **raw)
{
  tcp_raw_t *r = malloc(sizeof(*r));
  if (!r)
    return RMX_ENOMEM;
  int rc = rmx__shm_accept_fd(gate_of(g)->fd, &r->fd);
  if (rc) {
    free(r);
    return rc;
  }
  *raw = &r->raw;
  return 0;
}

static int shm_gate_give(rmx_tp_gate_t *g, rmx_tp_raw_t *raw, rmx_tp_t *tp)
{
  (void)g, (void)raw, (void)tp; /* a descriptor: any loop may start its channel */
  return 0;
}

static void shm_gate_close(rmx_tp_gate_t *g)
{
  rmx__shm_unlisten_fd(gate_of(g)->name, gate_of(g)->fd);
  free(g);
}

static void member_closed(uv_handle_t *h)
{
  rmx_tp_listener_t *l = h->data;
  rmx_tp_t *tp = l->tp;
  free(l);
  rmx__tcp_unlive(tp);
}

static int shm_listen(rmx_tp_t *tp, const struct sockaddr *sa, void *owner,
                      rmx_tp_listener_t **out)
{
  char name[RMX_SHM_NAME_MAX + 1];
  if (!sa) { /* a group member's: peers come from the gate (shm_feed) */
    rmx_tp_listener_t *l = calloc(1, sizeof(*l));
    if (!l)
      return RMX_ENOMEM;
    l->tp = tp;
    l->owner = owner;
    l->member = 1;
    l->kick = listener_kick;
    rmx_list_init(&l->pending);
    rmx_list_init(&l->fed);
    uv_timer_init(tp->loop, &l->retry); /* unused: the handle its close waits for */
    l->retry.data = l;
    l->handles = 1;
    tp->live++;
    rmx_list_push(&tp->listeners, &l->tp_link);
    *out = l;
    return 0;
  }
  if (sa->sa_family == AF_INET || sa->sa_family == AF_INET6)
    alias_name(sa, name); /* the alias of a listener at that address */
  else if (rmx__shm_sa_name(sa, name) != 0)
    return RMX_EINVAL;
  rmx_tp_listener_t *l = calloc(1, sizeof(*l));
  rmx_shm_listener_t *shl = calloc(1, sizeof(*shl));
  if (!l || !shl) {
    free(l);
    free(shl);
    return RMX_ENOMEM;
  }
  l->tp = tp;
  l->owner = owner;
  l->shl = shl;
  l->kick = listener_kick;
  rmx_list_init(&l->pending);
  rmx_list_init(&l->fed);
  shl->data = l;
  int rc = rmx__shm_listen(shl, tp->loop, name, incoming);
  if (rc) {
    if (sa->sa_family == AF_UNIX) /* an alias's failure is the core's to report */
      RMX_TP_LOG(tp->env, ERROR, "shm: cannot listen on %s: %s", name, rmx_strerror(rc));
    free(l);
    free(shl);
    return rc;
  }
  l->polling = 1;
  l->handles = 1;
  tp->live++;
  rmx_list_push(&tp->listeners, &l->tp_link);
  listener_kick(l);
  *out = l;
  return 0;
}

static int shm_listen_addr(rmx_tp_listener_t *l, struct sockaddr_storage *ss)
{
  return l->shl ? rmx__uri_unix(l->shl->name, ss) : RMX_ENOTSUP; /* a member: the gate's */
}

static void shm_listen_close(rmx_tp_listener_t *l)
{
  rmx_list_t *n;
  l->paused = 1;
  rmx_list_del(&l->tp_link);
  while ((n = l->pending.next) != &l->pending)
    rmx__tcp_conn_close(rmx_container_of(n, rmx_tp_conn_t, lst_link));
  rmx_tp_raw_t *r;
  while ((r = rmx__tcp_unfeed(l)) != NULL)
    rmx__tcp_gate_drop(r);
  if (l->member)
    uv_close((uv_handle_t *)&l->retry, member_closed);
  else
    rmx__shm_listener_close(l->shl, lst_closed);
}

static void shm_listen_pause(rmx_tp_listener_t *l, int pause)
{
  l->paused = (uint8_t)(pause != 0);
  listener_kick(l);
}

/* ---- connecting ---- */

/* The first alias that answers and is held by the TCP port's uid. */
static int alias_connect(rmx_tp_t *tp, rmx_shm_chan_t *ch, const struct sockaddr *sa,
                         const char *const *names, int n, const rmx_shm_chan_cfg_t *cfg)
{
  long port_uid = -2; /* read once, when an alias answers */
  for (int i = 0; i < n; i++) {
    int fd, rc = rmx__shm_sock_connect(names[i], &fd);
    if (rc == RMX_ECONNREFUSED)
      continue;
    if (rc)
      return rc;
    struct ucred cr = {.uid = (uid_t)-1};
    socklen_t sl = sizeof(cr);
    if (port_uid == -2)
      port_uid = tcp_port_uid(sa_port(sa));
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &sl) == 0 && port_uid >= 0 &&
        (long)cr.uid == port_uid) {
      if ((rc = rmx__shm_chan_connect_fd(ch, tp->loop, fd, names[i], cfg,
                                         &rmx__shm_pipe_cbs)) != 0)
        close(fd);
      return rc;
    }
    close(fd);
    RMX_TP_LOG(tp->env, WARN, "shm: %s is held by uid %ld but TCP port %u by %s%ld: not "
               "taken for a peer on this host", names[i], (long)cr.uid, sa_port(sa),
               port_uid < 0 ? "nobody " : "uid ", port_uid);
  }
  return RMX_ECONNREFUSED;
}

static int shm_connect(rmx_tp_t *tp, const struct sockaddr *sa, const void *hello, size_t len,
                       void *owner, rmx_tp_conn_t **out)
{
  char names[3][RMX_SHM_NAME_MAX + 1];
  const char *list[3] = {names[0], names[1], names[2]};
  rmx_shm_chan_cfg_t cfg;
  int n = 1;
  if (len > TF_HELLO_MAX)
    return RMX_EINVAL;
  if (sa->sa_family == AF_INET || sa->sa_family == AF_INET6) {
    if ((n = alias_names(sa, names)) == 0)
      return RMX_ECONNREFUSED; /* not this host's address: no alias to reach */
  } else if (rmx__shm_sa_name(sa, names[0]) != 0) {
    return RMX_EINVAL;
  }
  rmx_tp_conn_t *tc = rmx__tcp_conn_new(tp, 0);
  if (!tc)
    return RMX_ENOMEM;
  shm_pipe_t *p = rmx__shm_pipe_new(tc);
  if (!p) {
    rmx__tcp_conn_close(tc);
    return RMX_ENOMEM;
  }
  memcpy(tc->hello, hello, len);
  tc->hello_len = len;
  tc->state = TC_CONNECTING;
  rmx__shm_pipe_cfg(tc, &cfg);
  int rc = sa->sa_family == AF_UNIX
               ? rmx__shm_chan_connect(&p->ch, tp->loop, names[0], &cfg, &rmx__shm_pipe_cbs)
               : alias_connect(tp, &p->ch, sa, list, n, &cfg);
  if (rc) {
    rmx__tcp_conn_close(tc);
    return rc;
  }
  rmx__shm_pipe_started(tc);
  tc->owner = owner;
  *out = tc;
  return 0;
}

/* The name connected to: the listener's, on both sides. */
static int shm_peer_addr(rmx_tp_conn_t *tc, struct sockaddr_storage *ss)
{
  return tc->ch ? rmx__uri_unix(tc->ch->name, ss) : RMX_ENOTCONN;
}

/* Both ends of a connection are known by the one name: the listener's. */
static int shm_local_addr(rmx_tp_conn_t *tc, struct sockaddr_storage *ss)
{
  return shm_peer_addr(tc, ss);
}

/* The peer process, from the socket's credentials. */
static int shm_conn_label(rmx_tp_conn_t *tc, char *buf, size_t len)
{
  struct ucred cr;
  socklen_t sl = sizeof(cr);
  if (!tc->ch || tc->ch->sock < 0 ||
      getsockopt(tc->ch->sock, SOL_SOCKET, SO_PEERCRED, &cr, &sl) != 0)
    return RMX_ENOTCONN;
  snprintf(buf, len, "pid %d", (int)cr.pid);
  return 0;
}

/* ---- busy-polling ---- */

/* Every open channel's rings (no system call where nothing changed), after
 * what ended: the rings are memory, there is no socket to ask. */
static int shm_poll(rmx_tp_t *tp, int *turn)
{
  rmx_list_t *n;
  (void)turn;
  int found = rmx__tcp_reap(tp);
  rmx_list_foreach(n, &tp->conns) {
    if (tp->finishing)
      break; /* a callback destroyed the context */
    rmx_tp_conn_t *tc = rmx_container_of(n, rmx_tp_conn_t, tp_link);
    if (tc->ch && !tc->closing)
      found += rmx__shm_chan_poll(tc->ch);
  }
  return found;
}

static int shm_spin(rmx_tp_t *tp)
{
  int turn = 0;
  return shm_poll(tp, &turn);
}

static int shm_init(const rmx_tp_env_t *env, rmx_tp_t **out)
{
  return rmx__tcp_init_as(env, &rmx__shm_pipe, "shm", out);
}

const rmx_tp_ops_t rmx__shm_ops = {
  .name = "shm",
  .flags = RMX_TP_F_LOOP_SPIN | RMX_TP_F_LOCAL_NAME,
  .wire_id = 3,
  .init = shm_init,
  .listen = shm_listen,
  .listen_addr = shm_listen_addr,
  .peer_addr = shm_peer_addr,
  .local_addr = shm_local_addr,
  .conn_label = shm_conn_label,
  .listen_close = shm_listen_close,
  .listen_pause = shm_listen_pause,
  .connect = shm_connect,
  .gate_open = shm_gate_open,
  .gate_addr = shm_gate_addr,
  .gate_take = shm_gate_take,
  .gate_give = shm_gate_give,
  .gate_drop = rmx__tcp_gate_drop, /* a descriptor either way */
  .gate_close = shm_gate_close,
  .feed = rmx__tcp_feed,
  .unfeed = rmx__tcp_unfeed,
  RMX_TCP_STREAM_OPS,
  .spin = shm_spin,
  .poll = shm_poll,
};
