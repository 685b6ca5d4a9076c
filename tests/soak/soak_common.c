/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the soak's roles share: the random numbers, the pattern every
 * payload carries, and the probes of a process's resource use.
 */
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <malloc.h>

#include "soak.h"

uint64_t soak_mix(uint64_t x)
{
  /* splitmix64's finalizer: neighbouring inputs give unrelated outputs */
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t soak_rand(uint64_t *s)
{
  uint64_t x = *s ? *s : 0x2545f4914f6cdd1dull;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  *s = x;
  return soak_mix(x);
}

uint64_t soak_range(uint64_t *s, uint64_t lo, uint64_t hi)
{
  return lo + soak_rand(s) % (hi - lo + 1);
}

/* Byte off of pattern seed: byte off % 8 of the word off / 8. */
static uint64_t pattern_word(uint64_t seed, uint64_t k) { return soak_mix(seed ^ (k * 0x100000001b3ull)); }

void soak_pattern(void *buf, size_t n, uint64_t seed, uint64_t off)
{
  unsigned char *p = buf;
  uint64_t w = pattern_word(seed, off / 8);
  for (size_t i = 0; i < n; i++, off++) {
    if (i > 0 && off % 8 == 0)
      w = pattern_word(seed, off / 8);
    p[i] = (unsigned char)(w >> (8 * (off % 8)));
  }
}

size_t soak_pattern_check(const void *buf, size_t n, uint64_t seed, uint64_t off)
{
  const unsigned char *p = buf;
  size_t bad = 0;
  uint64_t w = pattern_word(seed, off / 8);
  for (size_t i = 0; i < n; i++, off++) {
    if (i > 0 && off % 8 == 0)
      w = pattern_word(seed, off / 8);
    bad += p[i] != (unsigned char)(w >> (8 * (off % 8)));
  }
  return bad;
}

static void put64(unsigned char *p, uint64_t v)
{
  for (int i = 0; i < 8; i++)
    p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get64(const unsigned char *p)
{
  uint64_t v = 0;
  for (int i = 0; i < 8; i++)
    v |= (uint64_t)p[i] << (8 * i);
  return v;
}

/* Short payloads: the pattern of their length, so they are checkable too. */
static uint64_t short_seed(size_t n) { return 0x50a4ull ^ n; }

void soak_payload(void *buf, size_t n, uint64_t id)
{
  unsigned char *p = buf;
  if (n < SOAK_HDR) {
    soak_pattern(p, n, short_seed(n), 0);
    return;
  }
  put64(p, id);
  put64(p + 8, n);
  soak_pattern(p + SOAK_HDR, n - SOAK_HDR, soak_mix(id), SOAK_HDR);
}

static size_t bytes_differ(uint64_t a, uint64_t b)
{
  size_t bad = 0;
  for (int i = 0; i < 8; i++)
    bad += (unsigned char)(a >> (8 * i)) != (unsigned char)(b >> (8 * i));
  return bad;
}

size_t soak_payload_check(const void *buf, size_t n, uint64_t id)
{
  const unsigned char *p = buf;
  if (n < SOAK_HDR)
    return soak_pattern_check(p, n, short_seed(n), 0);
  uint64_t got = get64(p);
  size_t bad = bytes_differ(get64(p + 8), n);
  if (id)
    bad += bytes_differ(got, id);
  else
    id = got; /* a damaged id shows as a wrong pattern below */
  return bad + soak_pattern_check(p + SOAK_HDR, n - SOAK_HDR, soak_mix(id), SOAK_HDR);
}

uint64_t soak_payload_id(const void *buf, size_t n)
{
  return n < SOAK_HDR ? 0 : get64(buf);
}

int soak_fds(void)
{
  DIR *d = opendir("/proc/self/fd");
  if (!d)
    return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    n += e->d_name[0] != '.';
  closedir(d);
  return n - 1; /* the directory's own descriptor */
}

size_t soak_rss(rmx_ctx_t *ctx)
{
  /* Heap in use, not resident pages: librmx tells malloc never to give
   * memory back (docs/one-sided.md), so resident size only ever climbs to
   * the busiest moment of the run, leak or not. What is in use at a
   * checkpoint is what a leak would grow. */
  rmx_ctx_stats_t st;
  rmx_ctx_stats(ctx, &st);
  struct mallinfo2 mi = mallinfo2();
  size_t used = mi.uordblks + mi.hblkhd;
  return used > st.pool_bytes ? used - st.pool_bytes : 0;
}

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SOAK_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define SOAK_ASAN 1
#endif

int soak_sanitized(void)
{
#ifdef SOAK_ASAN
  return 1;
#else
  return 0;
#endif
}

uint64_t soak_now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}
