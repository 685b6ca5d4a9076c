/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A peer whose rdma_cm connections fail (for rmx-burst): raw librdmacm,
 * so it lives with the fault shims, the only tests that speak verbs.
 */
#ifndef RMX_TEST_FAULT_CM_PEER_H
#define RMX_TEST_FAULT_CM_PEER_H

#include <netinet/in.h>

/* One failing connection to @p sa, the way chosen by @p attempt (see the
 * source); NULL, or what went wrong on this side. */
const char *fault_cm_fail_once(const struct sockaddr_in *sa, int attempt);
/* Drop the ids kept half made. */
void fault_cm_end(void);

#endif
