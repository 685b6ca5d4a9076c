/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Diagnostics: one line each on stderr, never stdout. Base layer: the core
 * and every transport log through it, each with the level it was given.
 */
#ifndef RMX_BASE_LOG_H
#define RMX_BASE_LOG_H

#include <rmx/rmx.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

void rmx__log(rmx_log_level_t lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Log at RMX_LOG_<lvl> when the configured level (max) lets it through. */
#define RMX_LOG_AT(max, lvl, ...)                     \
  do {                                                \
    if ((int)(max) >= (int)RMX_LOG_##lvl)             \
      rmx__log(RMX_LOG_##lvl, __VA_ARGS__);           \
  } while (0)

/* Numeric "host:port" for logs; buf of at least 64 bytes. */
const char *rmx__sa_str(const struct sockaddr *sa, char *buf, size_t len);

/* One log line per second at most for a condition a peer can repeat at
 * will (refused requests, limits hit): rmx__ratelimit() says whether to log
 * at now_ms and how many lines were held back since the last. */
typedef struct rmx__ratelimit {
  uint64_t next_ms;
  uint32_t held;
} rmx__ratelimit_t;
int rmx__ratelimit(rmx__ratelimit_t *rl, uint64_t now_ms, uint32_t *held);

#endif
