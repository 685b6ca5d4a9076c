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
 * will (refused hellos, failed authentications, refused remote accesses,
 * limits hit). rmx__ratelimit() says whether a line may go out at now_ms;
 * when it may, it writes into sfx (len bytes) the suffix that line ends
 * with: "" or " (and N more like it not logged in the last S s)". Zero
 * fill before use. */
typedef struct rmx__ratelimit {
  uint64_t last_ms; /* when the last line went out */
  uint32_t held;    /* lines held back since */
  int logged;       /* a line went out already */
} rmx__ratelimit_t;
int rmx__ratelimit(rmx__ratelimit_t *rl, uint64_t now_ms, char *sfx, size_t len);
/* vsnprintf into buf: a log line cut at len is fine. */
void rmx__fmt(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Log through logfn (rmx__log, or a transport's env->log) at RMX_LOG_<lvl>
 * when max lets it through and the limiter rl lets a line out at now_ms;
 * the line ends with the limiter's count of what it held back. */
#define RMX_LOG_LIMITED_AT(logfn, max, rl, now_ms, lvl, ...)                   \
  do {                                                                         \
    if ((int)(max) >= (int)RMX_LOG_##lvl) {                                    \
      char rl_sfx_[96];                                                        \
      if (rmx__ratelimit((rl), (now_ms), rl_sfx_, sizeof(rl_sfx_))) {          \
        char rl_msg_[400];                                                     \
        rmx__fmt(rl_msg_, sizeof(rl_msg_), __VA_ARGS__);                       \
        (logfn)(RMX_LOG_##lvl, "%s%s", rl_msg_, rl_sfx_);                      \
      }                                                                        \
    }                                                                          \
  } while (0)

#endif
