/* SPDX-License-Identifier: BSD-3-Clause */
/* The metadata test's own etcd (meta_etcd.c), and its case in a libuv loop. */
#ifndef RMX_TEST_META_ETCD_H
#define RMX_TEST_META_ETCD_H

#include <stddef.h>

#include "test_util.h"

/* A loopback TCP port that nobody listens on (now). */
int free_port(void);
/* Start the member; endpoint gets its client URL. FAIL on error; else
 * its pid, for the caller's test_server_pid. */
pid_t etcd_start(char *endpoint, size_t len);
/* Print the end of its log on stderr. */
void etcd_log_tail(void);
/* It still runs. */
int etcd_alive(void);
/* meta_loop.c: a handle in the application's own libuv loop. */
void case_own_loop(const char *endpoint);

#endif
