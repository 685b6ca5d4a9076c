/* SPDX-License-Identifier: BSD-3-Clause */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>

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

/* Diagnostics go to the handler, else to stderr, one line each, never to
 * stdout. */
void rmx__log(rmx_log_level_t lvl, const char *fmt, ...)
{
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof(line), fmt, ap);
  va_end(ap);
  log_sink_t *s = atomic_load(&sink);
  if (s)
    s->fn(lvl, line, s->arg);
  else
    fprintf(stderr, "rmx %s: %s\n", level_name[lvl], line);
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
  } else {
    snprintf(buf, len, "(family %d)", sa->sa_family);
  }
  return buf;
}

int rmx__ratelimit(rmx__ratelimit_t *rl, uint64_t now, uint32_t *held)
{
  if (now < rl->next_ms) {
    rl->held++;
    return 0;
  }
  *held = rl->held;
  rl->held = 0;
  rl->next_ms = now + 1000;
  return 1;
}
