/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Faults for the verbs fault test (verbs_faults.c), linked in front of
 * librdmacm and libibverbs (the program's symbols win for librmx's calls):
 * rdma_create_qp records each QP under the tag the test set (which context
 * made it), so the test can silence one end behind rmx's back; ibv_reg_mr
 * fails when armed, as the locked-memory limit would make it; and while
 * shim_fake_err is set, moving a QP to the error state "succeeds" without
 * happening, so nothing posted on it is ever flushed.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "verbs_faults.h"

#define MAX_QPS 32

int shim_tag;
int shim_fail_reg;
int shim_fake_err;
static struct ibv_qp *g_qp[MAX_QPS];
static int g_tag[MAX_QPS], g_nqp;

int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_qp_init_attr *qa)
{
  typedef int (*create_fn)(struct rdma_cm_id *, struct ibv_pd *, struct ibv_qp_init_attr *);
  static create_fn real;
  if (!real)
    *(void **)&real = dlsym(RTLD_NEXT, "rdma_create_qp");
  int rc = real(id, pd, qa);
  if (rc == 0 && g_nqp < MAX_QPS) {
    g_qp[g_nqp] = id->qp;
    g_tag[g_nqp++] = shim_tag;
  }
  return rc;
}

typedef int (*modify_fn)(struct ibv_qp *, struct ibv_qp_attr *, int);

static modify_fn real_modify(void)
{
  static modify_fn real;
  if (!real)
    *(void **)&real = dlsym(RTLD_NEXT, "ibv_modify_qp");
  return real;
}

int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask)
{
  if (shim_fake_err && (mask & IBV_QP_STATE) && attr->qp_state == IBV_QPS_ERR)
    return 0;
  return real_modify()(qp, attr, mask);
}

/* The QPs made under tag to the error state: they answer nothing from now
 * on, as if their host were gone, and no disconnect is sent. */
int shim_silence(int tag)
{
  struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
  int n = 0;
  for (int i = 0; i < g_nqp; i++)
    if (g_tag[i] == tag && g_qp[i] && real_modify()(g_qp[i], &a, IBV_QP_STATE) == 0)
      n++;
  return n;
}

int shim_qps(int tag)
{
  int n = 0;
  for (int i = 0; i < g_nqp; i++)
    n += g_tag[i] == tag;
  return n;
}

void shim_forget(void) { g_nqp = 0; }

/* verbs.h makes ibv_reg_mr a macro over an inline that calls one of these */
#undef ibv_reg_mr
struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access)
{
  typedef struct ibv_mr *(*reg_fn)(struct ibv_pd *, void *, size_t, int);
  static reg_fn real;
  if (!real)
    *(void **)&real = dlsym(RTLD_NEXT, "ibv_reg_mr");
  if (shim_fail_reg > 0) {
    shim_fail_reg--;
    errno = ENOMEM;
    return NULL;
  }
  return real(pd, addr, len, access);
}

struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t len, uint64_t iova,
                                unsigned int access)
{
  typedef struct ibv_mr *(*reg_fn)(struct ibv_pd *, void *, size_t, uint64_t, unsigned int);
  static reg_fn real;
  if (!real)
    *(void **)&real = dlsym(RTLD_NEXT, "ibv_reg_mr_iova2");
  if (shim_fail_reg > 0) {
    shim_fail_reg--;
    errno = ENOMEM;
    return NULL;
  }
  return real(pd, addr, len, iova, access);
}
