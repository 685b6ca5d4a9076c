/* SPDX-License-Identifier: BSD-3-Clause */
/* What the hostile-segment test's roles share (shm_hostile.h): control
 * lines, the wait for a context or a command, counts of fds and maps. */
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "shm_hostile.h"

const char *const sh_kind_names[SH_KINDS] = {
  [K_HEAD_PAST] = "head-past", [K_HEAD_BACK] = "head-back", [K_HEAD_HUGE] = "head-huge",
  [K_HEAD_WRAP] = "head-wrap", [K_HEAD_CLAIM] = "head-claim", [K_TAIL_PAST] = "tail-past",
  [K_TAIL_BACK] = "tail-back", [K_TAIL_CLAIM] = "tail-claim", [K_FLAGS] = "flags",
  [K_HDR] = "header", [K_DATA0] = "data0", [F_LEN_MAX] = "len-max", [F_LEN_RING] = "len-ring",
  [F_LEN_LIMIT] = "len-limit", [F_LEN_SMALL] = "len-small", [F_PARTIAL] = "partial",
  [F_KIND] = "kind", [F_RESERVED] = "reserved", [F_HELLO] = "hello", [F_RD_OOB] = "read-oob",
  [F_WR_OOB] = "write-oob", [F_RD_WRAP] = "read-wrap", [F_GARBAGE] = "garbage",
  [R_ANY] = "race-any", [R_IDX] = "race-idx", [K_DIE] = "die",
};

int sh_kind_refused(sh_kind_t k)
{
  switch (k) {
  case K_HEAD_PAST: case K_HEAD_BACK: case K_HEAD_HUGE: case K_TAIL_PAST: case K_TAIL_BACK:
  case F_LEN_MAX: case F_LEN_RING: case F_LEN_LIMIT: case F_KIND: case F_RESERVED: case F_HELLO:
    return 1;
  default:
    return 0;
  }
}

void sh_say(const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  putchar('\n');
  fflush(stdout);
}

void sh_die(const char *fmt, ...)
{
  va_list ap;
  fputs("rmx-shm-hostile: ", stderr);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  exit(1);
}

int sh_lines_fill(sh_lines_t *l)
{
  while (!l->eof && l->used < sizeof(l->buf)) {
    ssize_t k = read(l->fd, l->buf + l->used, sizeof(l->buf) - l->used);
    if (k > 0) {
      l->used += (size_t)k;
      continue;
    }
    if (k < 0 && errno == EINTR)
      continue;
    if (k < 0 && errno == EAGAIN)
      return 0;
    l->eof = 1;
  }
  return l->eof ? -1 : 0;
}

int sh_lines_next(sh_lines_t *l, char *out, size_t n)
{
  char *nl = memchr(l->buf, '\n', l->used);
  if (!nl) {
    if (l->used == sizeof(l->buf)) /* a line longer than the buffer: cut it */
      nl = l->buf + l->used - 1;
    else
      return 0;
  }
  size_t len = (size_t)(nl - l->buf);
  size_t take = len < n - 1 ? len : n - 1;
  memcpy(out, l->buf, take);
  out[take] = '\0';
  l->used -= len + 1;
  memmove(l->buf, nl + 1, l->used);
  return 1;
}

int sh_lines_wait(sh_lines_t *l, char *out, size_t n)
{
  for (;;) {
    if (sh_lines_next(l, out, n))
      return 1;
    if (l->eof)
      return 0;
    struct pollfd p = {.fd = l->fd, .events = POLLIN};
    poll(&p, 1, -1);
    sh_lines_fill(l);
  }
}

int sh_turn(rmx_ctx_t *ctx, sh_lines_t *in, int cap_ms)
{
  struct pollfd p[2] = {{.fd = rmx_ctx_fd(ctx), .events = POLLIN},
                        {.fd = in ? in->fd : -1, .events = POLLIN}};
  int ms = rmx_ctx_timeout(ctx);
  if (ms < 0 || ms > cap_ms)
    ms = cap_ms;
  int have = in && (in->eof || memchr(in->buf, '\n', in->used) != NULL);
  if (poll(p, 2, have ? 0 : ms) > 0 && (p[1].revents & (POLLIN | POLLHUP)))
    sh_lines_fill(in);
  rmx_ctx_progress(ctx);
  return in && (in->eof || memchr(in->buf, '\n', in->used) != NULL);
}

uint64_t sh_now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint64_t sh_rand(uint64_t *s)
{
  /* splitmix64 */
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

int sh_count_fds(void)
{
  DIR *d = opendir("/proc/self/fd");
  int n = 0;
  if (!d)
    return -1;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    if (e->d_name[0] != '.')
      n++;
  closedir(d);
  return n - 1; /* the directory's own */
}

int sh_count_seg_maps(void)
{
  FILE *f = fopen("/proc/self/maps", "re");
  char line[512];
  int n = 0;
  if (!f)
    return -1;
  while (fgets(line, sizeof(line), f))
    n += strstr(line, "memfd:rmx-shm") != NULL;
  fclose(f);
  return n;
}
