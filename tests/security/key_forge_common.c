/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the key-forging test's roles share: the packed key's layout, written
 * from docs/protocol.md ("Remote keys"), its CRC-32C, the memory tags, and
 * a few loop helpers.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <uv.h>

#include "key_forge.h"
#include "../conformance/rawpeer.h"

/* ---- the packed key ---- */

#define KEY_VERSION 2
#define KEY_HDR 24
#define KEY_ENTRY 16

static uint64_t get_le(const uint8_t *p, int n)
{
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

static void put_le(uint8_t *p, uint64_t v, int n)
{
  for (int i = 0; i < n; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

/* The blob's checksum: over the whole blob with its checksum field zero. */
static uint32_t blob_sum(const uint8_t *blob, size_t len)
{
  uint8_t tmp[KEY_HDR + 8 * KEY_ENTRY];
  if (len > sizeof(tmp))
    return 0;
  memcpy(tmp, blob, len);
  memset(tmp + 4, 0, 4);
  return crc32c(tmp, len); /* rawpeer.c's, as the hostile suites use */
}

int kf_key_decode(const uint8_t *blob, size_t len, uint8_t tp, kf_key_t *k)
{
  if (len < KEY_HDR || blob[0] != KEY_VERSION || blob[1] == 0 || blob[1] > 8 ||
      len != KEY_HDR + (size_t)blob[1] * KEY_ENTRY)
    return -1;
  if (get_le(blob + 4, 4) != blob_sum(blob, len))
    return -2;
  for (unsigned i = 0; i < blob[1]; i++) {
    const uint8_t *e = blob + KEY_HDR + i * KEY_ENTRY;
    if (e[0] != tp)
      continue;
    k->rights = (uint16_t)get_le(blob + 2, 2);
    k->addr = get_le(blob + 8, 8);
    k->len = get_le(blob + 16, 8);
    k->tp = tp;
    k->key = get_le(e + 8, 8);
    return 0;
  }
  return -3;
}

size_t kf_key_encode(const kf_key_t *k, uint8_t *blob)
{
  size_t len = KEY_HDR + KEY_ENTRY;
  memset(blob, 0, len);
  blob[0] = KEY_VERSION;
  blob[1] = 1;
  put_le(blob + 2, k->rights, 2);
  put_le(blob + 8, k->addr, 8);
  put_le(blob + 16, k->len, 8);
  blob[KEY_HDR] = k->tp;
  put_le(blob + KEY_HDR + 8, k->key, 8);
  rkey_fix_sum(blob, len);
  return len;
}

void kf_hex(const uint8_t *p, size_t n, char *out)
{
  for (size_t i = 0; i < n; i++)
    sprintf(out + 2 * i, "%02x", p[i]);
  out[2 * n] = 0;
}

size_t kf_unhex(const char *s, uint8_t *out, size_t max)
{
  size_t n = strlen(s);
  if (n % 2 || n / 2 > max || n == 0)
    return 0;
  for (size_t i = 0; i < n / 2; i++) {
    unsigned v;
    if (sscanf(s + 2 * i, "%2x", &v) != 1)
      return 0;
    out[i] = (uint8_t)v;
  }
  return n / 2;
}

/* ---- memory tags ---- */

void kf_fill(void *buf, size_t n, uint64_t tag)
{
  uint64_t *w = buf;
  for (size_t i = 0; i < n / 8; i++)
    w[i] = tag | (i & 0xffff);
}

size_t kf_count(const void *buf, size_t n, uint64_t tag)
{
  const uint64_t *w = buf;
  size_t hits = 0;
  for (size_t i = 0; i < n / 8; i++)
    hits += (w[i] & KF_TAG_MASK) == tag;
  return hits * 8;
}

/* ---- process helpers ---- */

uint64_t kf_env_u64(const char *name, uint64_t def)
{
  const char *v = getenv(name);
  if (!v || !*v)
    return def;
  char *end;
  errno = 0;
  unsigned long long x = strtoull(v, &end, 10);
  if (errno || *end || x == 0) {
    fprintf(stderr, "key-forge: %s=%s: a positive decimal number is expected\n", name, v);
    exit(2);
  }
  return x;
}

uint64_t kf_now_ms(void) { return uv_hrtime() / 1000000u; }

void *kf_map(size_t n)
{
  void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    perror("key-forge: mmap");
    exit(2);
  }
  return p;
}

void kf_unmap(void *p, size_t n) { munmap(p, n); }

rmx_ctx_t *kf_ctx(void)
{
  rmx_config_t cfg;
  rmx_ctx_t *ctx;
  int rc = rmx_config_init(&cfg);
  if (rc == 0) {
    if (cfg.max_msg_size < KF_MSG)
      cfg.max_msg_size = KF_MSG;
    rc = rmx_ctx_create(&ctx, NULL, &cfg);
  }
  if (rc) {
    fprintf(stderr, "key-forge: context: %s\n", rmx_strerror(rc));
    exit(2);
  }
  return ctx;
}

void kf_run_until(rmx_ctx_t *ctx, const int *flag)
{
  while (!*flag)
    uv_run(rmx_ctx_loop(ctx), UV_RUN_ONCE);
}

void kf_say(const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  putchar('\n');
  fflush(stdout);
}

/* ---- stdin ---- */

static struct {
  uv_poll_t poll;
  int on;
  kf_line_fn on_line;
  int *eof;
  char line[4096];
  size_t used;
} In;

static void stdin_readable(uv_poll_t *p, int status, int events)
{
  (void)p;
  (void)events;
  char buf[1024];
  ssize_t n = status < 0 ? 0 : read(STDIN_FILENO, buf, sizeof(buf));
  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return;
  if (n <= 0) {
    *In.eof = 1;
    kf_stdin_stop();
    return;
  }
  for (ssize_t i = 0; i < n; i++) {
    if (buf[i] == '\n' || In.used == sizeof(In.line) - 1) {
      In.line[In.used] = 0;
      In.used = 0;
      if (In.on_line)
        In.on_line(In.line);
    } else {
      In.line[In.used++] = buf[i];
    }
  }
}

void kf_stdin_watch(rmx_ctx_t *ctx, kf_line_fn on_line, int *eof)
{
  In.on_line = on_line;
  In.eof = eof;
  fcntl(STDIN_FILENO, F_SETFL, fcntl(STDIN_FILENO, F_GETFL) | O_NONBLOCK);
  if (uv_poll_init(rmx_ctx_loop(ctx), &In.poll, STDIN_FILENO) ||
      uv_poll_start(&In.poll, UV_READABLE | UV_DISCONNECT, stdin_readable)) {
    fprintf(stderr, "key-forge: cannot watch stdin\n");
    exit(2);
  }
  In.on = 1;
}

void kf_stdin_stop(void)
{
  if (!In.on)
    return;
  In.on = 0;
  uv_close((uv_handle_t *)&In.poll, NULL);
}
