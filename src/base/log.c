/* SPDX-License-Identifier: BSD-3-Clause */
#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

static const char *const level_name[] = {"none", "error", "warn", "info", "debug", "trace"};

/* The application's handler and its argument, swapped together. */
typedef struct log_sink {
  rmx_log_fn fn;
  void *arg;
} log_sink_t;
static log_sink_t sinks[2];
static _Atomic(log_sink_t *) sink;

void rmx_log_set_handler(rmx_log_fn fn, void *arg)
{
  /* Two slots: a logger still reading the other one sees it whole. */
  log_sink_t *cur = atomic_load(&sink), *next = cur == &sinks[0] ? &sinks[1] : &sinks[0];
  *next = (log_sink_t){fn, arg};
  atomic_store(&sink, fn ? next : NULL);
}

/* "2026-11-26T01:54:08.123Z rmx[PID/TID] LEVEL: " into buf. */
static void line_prefix(rmx_log_level_t lvl, char *buf, size_t len)
{
  struct timespec ts;
  struct tm tm;
  char when[32] = "?";
  clock_gettime(CLOCK_REALTIME, &ts);
  if (gmtime_r(&ts.tv_sec, &tm))
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(buf, len, "%s.%03ldZ rmx[%ld/%ld] %s: ", when, ts.tv_nsec / 1000000L, (long)getpid(),
           (long)syscall(SYS_gettid), level_name[lvl]);
}

/* Diagnostics go to the handler, else to stderr, one line each, never to
 * stdout. The handler gets the message alone: it runs on the thread that
 * logs, so the time, process and thread are its own to take. */
void rmx__log(rmx_log_level_t lvl, const char *fmt, ...)
{
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof(line), fmt, ap);
  va_end(ap);
  log_sink_t *s = atomic_load(&sink);
  if (s) {
    s->fn(lvl, line, s->arg);
  } else {
    char pre[96];
    line_prefix(lvl, pre, sizeof(pre));
    fprintf(stderr, "%s%s\n", pre, line); /* one call: lines of threads do not mix */
  }
}

const char *rmx__sa_str(const struct sockaddr *sa, char *buf, size_t len)
{
  char ip[INET6_ADDRSTRLEN] = "?";
  if (sa->sa_family == AF_INET) {
    const struct sockaddr_in *in = (const void *)sa;
    inet_ntop(AF_INET, &in->sin_addr, ip, sizeof(ip));
    snprintf(buf, len, "%s:%u", ip, ntohs(in->sin_port));
  } else if (sa->sa_family == AF_INET6) {
    const struct sockaddr_in6 *in6 = (const void *)sa;
    inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof(ip));
    snprintf(buf, len, "[%s]:%u", ip, ntohs(in6->sin6_port));
  } else if (sa->sa_family == AF_UNIX) { /* "/path", "@abstract", or "" unnamed */
    const struct sockaddr_un *un = (const void *)sa;
    if (un->sun_path[0] == '\0')
      snprintf(buf, len, "%s%.*s", un->sun_path[1] ? "@" : "", (int)sizeof(un->sun_path) - 1,
               un->sun_path + 1);
    else
      snprintf(buf, len, "%.*s", (int)sizeof(un->sun_path), un->sun_path);
  } else {
    snprintf(buf, len, "(family %d)", sa->sa_family);
  }
  return buf;
}

void rmx__fmt(char *buf, size_t len, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, len, fmt, ap);
  va_end(ap);
}

int rmx__ratelimit(rmx__ratelimit_t *rl, uint64_t now, char *sfx, size_t len)
{
  if (rl->logged && now < rl->last_ms + 1000) {
    rl->held++;
    return 0;
  }
  if (rl->held)
    snprintf(sfx, len, " (and %" PRIu32 " more like it not logged in the last %" PRIu64 ".%" PRIu64
             " s)", rl->held, (now - rl->last_ms) / 1000, (now - rl->last_ms) % 1000 / 100);
  else if (len)
    sfx[0] = '\0';
  rl->held = 0;
  rl->last_ms = now;
  rl->logged = 1;
  return 1;
}
