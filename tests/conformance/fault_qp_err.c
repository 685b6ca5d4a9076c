/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A fault for the verbs transport's close path. Linked into a test program,
 * this ibv_modify_qp stands in front of libibverbs' own (the program's
 * symbol wins for librmx's and librdmacm's calls too). With
 * RMX_TEST_QP_ERR_FAILS set, moving a QP to the error state fails, so no
 * close can start its drain: every one takes the path that destroys the QP
 * and parks its memory until the shared CQ can no longer name it. The
 * program fails at exit if the fault never fired, so the test cannot pass
 * without exercising that path.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <infiniband/verbs.h>

static atomic_int fired;

int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask)
{
  typedef int (*modify_fn)(struct ibv_qp *, struct ibv_qp_attr *, int);
  static modify_fn real;
  if (!real)
    *(void **)&real = dlsym(RTLD_NEXT, "ibv_modify_qp");
  if ((mask & IBV_QP_STATE) && attr->qp_state == IBV_QPS_ERR &&
      getenv("RMX_TEST_QP_ERR_FAILS")) {
    atomic_fetch_add(&fired, 1);
    return EINVAL;
  }
  return real(qp, attr, mask);
}

__attribute__((destructor)) static void check_fired(void)
{
  if (getenv("RMX_TEST_QP_ERR_FAILS") && atomic_load(&fired) == 0) {
    fprintf(stderr, "fault_qp_err: no QP was ever moved to the error state\n");
    _exit(3);
  }
  if (getenv("RMX_TEST_QP_ERR_FAILS"))
    fprintf(stderr, "fault_qp_err: %d moves to the error state refused\n", atomic_load(&fired));
}
