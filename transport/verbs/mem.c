/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Registrations and memory windows: who may reach registered memory.
 *
 * On a device with type-2 memory windows an MR never carries remote access
 * of its own. A peer reaches memory through a window bound to its own
 * connection's QP (a rendezvous source for one message, a registration
 * packed for one connection): the device refuses the window's key on any
 * other QP, and after the window is deallocated. A capability key
 * (rmx_mem_pack) is a second MR over the same bytes, with remote access,
 * made when first asked for. With a protection domain per connection
 * (RMX_KEY_SCOPE=pd, or a device without windows; pd.c) what is exposed to
 * one peer is an MR with the remote rights in that peer's connection's PD,
 * and there are no capability keys: one key cannot span PDs.
 *
 * With several devices (dev.c) what a connection is given goes by its own
 * device's mode (scope->dev, tc->dev); registrations without one, and
 * capability keys, are the first device's (tp->dev). A connection on a
 * later device (always a PD per connection) cannot use a capability key:
 * its peer's access with one is refused as a forged key's would be.
 *
 * The window's key is ours to choose in its low byte; the rest is the
 * device's index. A bind is a request on the QP's send queue, chained
 * ahead of whatever is sent after it, so the RTS or message that carries
 * the key reaches the peer after the window is bound (qp.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "verbs.h"

static unsigned remote_flags(unsigned access)
{
  return (access & RMX_TP_ACC_REMOTE_READ ? IBV_ACCESS_REMOTE_READ : 0) |
         (access & RMX_TP_ACC_REMOTE_WRITE ? IBV_ACCESS_REMOTE_WRITE : 0) |
         (access & RMX_TP_ACC_REMOTE_ATOMIC ? IBV_ACCESS_REMOTE_ATOMIC : 0);
}

/* Remote writes and atomics need local write on the MR under them. */
static unsigned write_for(unsigned remote)
{
  return remote & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC) ? IBV_ACCESS_LOCAL_WRITE
                                                                       : 0;
}

/* Local write only where needed (a read-only source can be sent, and read
 * remotely). */
static unsigned local_flags(unsigned access)
{
  return access & RMX_TP_ACC_LOCAL ? IBV_ACCESS_LOCAL_WRITE : write_for(remote_flags(access));
}

/* A fresh low byte for a window's key: unlike its current one (the device
 * refuses a bind to the same key) and not predictable from it. */
static uint32_t new_key(uint32_t old)
{
  uint8_t b = 0;
  if (getrandom(&b, 1, 0) != 1)
    b = (uint8_t)(old + 1);
  if (b == (uint8_t)old)
    b ^= 0x5a;
  return (old & ~0xffu) | b;
}

/* Allocate m's window and queue its bind on tc's QP. */
static int window_new(rmx_tp_mem_t *m, struct rmx_tp_conn *tc)
{
  if (tc->dead || tc->closing || tc->state != VC_UP)
    return RMX_ENOTCONN;
  m->mw = ibv_alloc_mw(tc->dev->pd, IBV_MW_TYPE_2);
  if (!m->mw) {
    int rc = rmx__vb_err_from_errno(errno);
    RMX_TP_LOG(m->tp->env, ERROR, "rdma: cannot allocate a memory window on %s: %s",
               tc->dev->name, strerror(errno));
    return rc;
  }
  /* The bind names the window by its current key (mw->rkey, read when the
   * request is posted); after it the window answers to the new one. The
   * provider leaves mw->rkey as it was, which is right here: each window
   * is bound once. */
  m->rkey = new_key(m->mw->rkey);
  m->tc = tc;
  rmx_list_push(&tc->windows, &m->link);
  rmx_list_push(&tc->bind_wait, &m->wait_link); /* bound in order */
  m->waiting = 1;
  rmx__vb_binds_chain(tc);
  return 0;
}

static rmx_tp_mem_t *mem_new(struct rmx_tp *tp, void *addr, size_t len, unsigned access)
{
  rmx_tp_mem_t *m = calloc(1, sizeof(*m));
  if (!m)
    return NULL;
  m->tp = tp;
  m->addr = addr;
  m->len = len ? len : 1;
  m->remote = remote_flags(access);
  m->local = local_flags(access);
  rmx_list_init(&m->link);
  rmx_list_init(&m->wait_link);
  rmx_list_init(&m->pdmrs);
  return m;
}

/* PD mode: m's MR, with its remote rights, in tc's own PD. */
static int pd_mr_new(rmx_tp_mem_t *m, struct rmx_tp_conn *tc)
{
  if (tc->dead || tc->closing || tc->state != VC_UP || !tc->own_pd)
    return RMX_ENOTCONN;
  m->mr = ibv_reg_mr(tc->pd, m->addr, m->len, (int)(m->local | m->remote));
  if (!m->mr)
    return rmx__vb_reg_err(m->tp, m->len, errno);
  m->in_pd = tc->own_pd;
  m->in_pd->refs++;
  m->rkey = m->mr->rkey;
  return 0;
}

int rmx__vb_mem_reg(struct rmx_tp *tp, void *addr, size_t len, unsigned access,
                    struct rmx_tp_conn *scope, rmx_tp_mem_t **out)
{
  if (!tp->dev) {
    /* Callers skip this transport until a connection opens a device (the
     * pool asks at every allocation until then): not an error to log. */
    RMX_TP_LOG(tp->env, DEBUG, "rdma: no device in use yet to register memory with");
    return RMX_ENODEV;
  }
  rmx_tp_mem_t *m = mem_new(tp, addr, len, access);
  if (!m)
    return RMX_ENOMEM;
  vb_dev_t *dev = scope && scope->dev ? scope->dev : tp->dev; /* the scope's mode */
  if (dev->pd_per_conn) {
    /* Exposed: in the connection's PD. Local only: in each PD where used
     * (pd.c), so nothing here. */
    int rc = scope ? pd_mr_new(m, scope) : 0;
    if (rc) {
      free(m);
      return rc;
    }
    *out = m;
    return 0;
  }
  int windows = m->remote && dev->windows;
  unsigned flags = m->local | (windows ? IBV_ACCESS_MW_BIND : m->remote);
  m->mr = ibv_reg_mr(dev->pd, addr, m->len, (int)flags);
  if (!m->mr) {
    int rc = rmx__vb_reg_err(tp, len, errno);
    free(m);
    return rc;
  }
  m->rkey = m->mr->rkey; /* a key only without remote rights; see mem_open */
  if (windows && scope) {
    int rc = window_new(m, scope);
    if (rc) {
      ibv_dereg_mr(m->mr);
      free(m);
      return rc;
    }
  }
  *out = m;
  return 0;
}

/* On the first device only: a key no other device's QP can use (above). */
int rmx__vb_mem_open(rmx_tp_mem_t *m)
{
  if (m->mw || m->parent)
    return RMX_EINVAL; /* a window is one connection's */
  if (m->tp->dev->pd_per_conn) {
    if (m->tp->dev->told_no_cap)
      return RMX_ENOTSUP;
    m->tp->dev->told_no_cap = 1;
    RMX_TP_LOG(m->tp->env, ERROR, "rdma: no capability key (rmx_mem_pack) with a protection "
               "domain per connection on %s (RMX_KEY_SCOPE=%s): one key cannot span them; use "
               "rmx_mem_pack_for (logged once)", m->tp->dev->name,
               m->tp->env->cfg->key_scope == RMX_KEY_SCOPE_PD ? "pd" : "auto, no windows");
    return RMX_ENOTSUP;
  }
  if (!m->remote || m->open_mr)
    return 0;
  m->open_mr =
      ibv_reg_mr(m->tp->dev->pd, m->addr, m->len, (int)(m->remote | write_for(m->remote)));
  if (!m->open_mr)
    return rmx__vb_reg_err(m->tp, m->len, errno);
  m->rkey = m->open_mr->rkey;
  return 0;
}

int rmx__vb_mem_grant(rmx_tp_mem_t *parent, struct rmx_tp_conn *tc, rmx_tp_mem_t **out)
{
  if (!parent->remote || parent->mw || parent->parent || parent->in_pd)
    return RMX_EINVAL;
  rmx_tp_mem_t *m = mem_new(parent->tp, parent->addr, parent->len, 0);
  if (!m)
    return RMX_ENOMEM;
  m->parent = parent;
  m->remote = parent->remote;
  m->local = parent->local;
  if (tc->dev->pd_per_conn) { /* a later device's connection is, whatever the first is */
    int rc = pd_mr_new(m, tc);
    if (rc) {
      free(m);
      return rc;
    }
    *out = m;
    return 0;
  }
  m->mr = parent->mr;
  int rc = window_new(m, tc);
  if (rc) {
    free(m);
    return rc;
  }
  rmx__vb_flush(tc); /* bound now, not at the connection's next send */
  *out = m;
  return 0;
}

/*
 * Deallocating the window is what revokes it: synchronous, so no access
 * starts after this returns. A bind still waiting or built but not posted
 * is dropped first; one posted but not yet executed then fails at the
 * device, which ends that connection (only a release within microseconds
 * of rmx_mem_pack_for can meet that).
 */
void rmx__vb_mem_dereg(rmx_tp_mem_t *m)
{
  if (m->mw) {
    if (m->tc) {
      rmx_list_del(&m->link);
      if (m->waiting)
        rmx_list_del(&m->wait_link);
      else
        rmx__vb_bind_unchain(m->tc, m->mw);
    }
    if (ibv_dealloc_mw(m->mw))
      RMX_TP_LOG(m->tp->env, WARN, "rdma: ibv_dealloc_mw failed: %s", strerror(errno));
  }
  if (m->open_mr && ibv_dereg_mr(m->open_mr))
    RMX_TP_LOG(m->tp->env, WARN, "rdma: ibv_dereg_mr failed");
  rmx__vb_pd_mem_release(m);
  if (m->in_pd) { /* PD mode: an MR of its own, in one connection's PD */
    if (ibv_dereg_mr(m->mr))
      RMX_TP_LOG(m->tp->env, WARN, "rdma: ibv_dereg_mr failed");
    rmx__vb_pd_unref(m->in_pd);
  } else if (m->mr && !m->parent && ibv_dereg_mr(m->mr)) {
    RMX_TP_LOG(m->tp->env, WARN, "rdma: ibv_dereg_mr failed");
  }
  free(m);
}

uint64_t rmx__vb_mem_rkey(const rmx_tp_mem_t *m) { return m->rkey; }
