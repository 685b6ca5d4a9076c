/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The shm:// transport: the TCP transport's stream engine (transport/tcp/,
 * every frame, key and request rule unchanged) over a shared-memory
 * channel (chan.h) in place of a socket. Two files:
 *   pipe.c  the channel as the stream's pipe (tcp.h, tcp_pipe_t)
 *   tp.c    listeners, connects, busy-polling and the ops table
 * docs/architecture.md, "Shared memory: the transport".
 */
#ifndef RMX_SHM_TP_H
#define RMX_SHM_TP_H

#include <sys/un.h>

#include "../tcp/tcp.h"
#include "chan.h"

/* A connection's pipe: its channel, and the writes the ring could not take
 * yet, in order. */
typedef struct shm_wq shm_wq_t;
typedef struct shm_pipe {
  rmx_shm_chan_t ch; /* ch.data: the connection */
  shm_wq_t *q, *q_last;
  uint8_t started; /* the channel was started: it has handles to close */
  uint8_t up;      /* ready came: the channel carries bytes */
  uint8_t reading; /* the stream reads (read_start, until read_stop) */
  uint8_t shut;    /* shutdown asked: close once the queue is written */
  uint8_t cut;     /* read no more from queued writes' memory */
} shm_pipe_t;

/* The smallest remote read or write that goes by one copy once agreed
 * (chan_copy.c): below it the two copies through the ring cost less than
 * the system call and the page pinning. */
#define RMX_SHM_COPY_MIN (32u << 10)

extern const tcp_pipe_t rmx__shm_pipe;

/* pipe.c: a new pipe for tc, its channel not started (NULL: no memory). */
shm_pipe_t *rmx__shm_pipe_new(rmx_tp_conn_t *tc);
/* pipe.c: the channel of tc's pipe was started: it has a handle to close. */
void rmx__shm_pipe_started(rmx_tp_conn_t *tc);
/* pipe.c: the callbacks every channel of the transport gets. */
extern const rmx_shm_chan_cbs_t rmx__shm_pipe_cbs;
/* pipe.c: the channel settings of a new connection. */
void rmx__shm_pipe_cfg(rmx_tp_conn_t *tc, rmx_shm_chan_cfg_t *cfg);

/* The Unix socket name ("/path" or "@name") of an AF_UNIX address (the
 * way back is rmx__uri_unix): 0, or RMX_EINVAL (not AF_UNIX, no name, too
 * long). */
int rmx__shm_sa_name(const struct sockaddr *sa, char name[RMX_SHM_NAME_MAX + 1]);

#endif
