/* SPDX-License-Identifier: BSD-3-Clause */
/* A raw rmx peer over TCP, from docs/protocol.md alone (see rawpeer.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "rawpeer.h"

/* ---- byte order ---- */

void p16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8); }

void p32(uint8_t *p, uint32_t v)
{
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

void p64(uint8_t *p, uint64_t v)
{
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

uint16_t g16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

uint32_t g32(const uint8_t *p)
{
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

uint64_t g64(const uint8_t *p) { return (uint64_t)g32(p) | (uint64_t)g32(p + 4) << 32; }

/* ---- the hello ---- */

hello_t hello_default(void)
{
  return (hello_t){.magic = MAGIC, .version = VERSION, .eager = 8192, .depth = 64,
                   .max_msg = 64u << 20, .silence = 0, .window = 64};
}

void hello_enc(uint8_t *o, const hello_t *h)
{
  p32(o, h->magic);
  p16(o + 4, h->version);
  p16(o + 6, h->flags);
  p32(o + 8, h->eager);
  p32(o + 12, h->depth);
  p64(o + 16, h->max_msg);
  p32(o + 24, h->silence);
#ifdef HOSTILE_OLD_PROTOCOL
  p32(o + 28, 0); /* reserved then */
#else
  p32(o + 28, h->window);
#endif
}

void hello_dec(const uint8_t *b, hello_t *h)
{
  h->magic = g32(b);
  h->version = g16(b + 4);
  h->flags = g16(b + 6);
  h->eager = g32(b + 8);
  h->depth = g32(b + 12);
  h->max_msg = g64(b + 16);
  h->silence = g32(b + 24);
  h->window = g32(b + 28);
}

/* ---- frames ---- */

size_t tfx(uint8_t *o, uint8_t kind, uint8_t flags, uint16_t res, uint32_t blen)
{
  p32(o, blen);
  o[4] = kind;
  o[5] = flags;
  p16(o + 6, res);
  return 8;
}

size_t tf(uint8_t *o, uint8_t kind, uint32_t blen) { return tfx(o, kind, 0, 0, blen); }

size_t tframe(uint8_t *o, uint8_t kind, const void *body, uint32_t blen)
{
  tf(o, kind, blen);
  if (blen)
    memcpy(o + 8, body, blen);
  return 8 + blen;
}

size_t hello_frame(uint8_t *o, const hello_t *h, uint8_t flags, uint16_t res)
{
  tfx(o, K_HELLO, flags, res, HELLO_LEN);
  hello_enc(o + 8, h);
  return 8 + HELLO_LEN;
}

size_t msg_frame(uint8_t *o, uint8_t type, uint8_t flags, uint16_t credits, const void *body,
                 uint32_t blen)
{
  tfx(o, (uint8_t)(K_FRAME + type), flags, credits, blen);
  if (blen)
    memcpy(o + 8, body, blen);
  return 8 + blen;
}

size_t rd_req_enc(uint8_t *o, uint64_t id, uint64_t addr, uint64_t len, uint64_t key)
{
  tf(o, K_RD_REQ, 32);
  p64(o + 8, id);
  p64(o + 16, addr);
  p64(o + 24, len);
  p64(o + 32, key);
  return 40;
}

size_t resp_hdr(uint8_t *o, uint8_t kind, uint32_t blen, uint64_t id, int32_t status)
{
  tf(o, kind, blen);
  p64(o + 8, id);
  p32(o + 16, (uint32_t)status);
  return 20;
}

/* ---- packed keys ---- */

uint32_t crc32c(const uint8_t *p, size_t n)
{
  uint32_t crc = 0xffffffffu;
  while (n--) {
    crc ^= *p++;
    for (int k = 0; k < 8; k++)
      crc = (crc >> 1) ^ (0x82f63b78u & (0u - (crc & 1)));
  }
  return ~crc;
}

void rkey_fix_sum(uint8_t *b, size_t len)
{
  p32(b + 4, 0);
  p32(b + 4, crc32c(b, len));
}

int rkey_tcp(const uint8_t *b, size_t len, tkey_t *k)
{
  unsigned n = b[1];
  if (len != 24 + 16 * (size_t)n)
    return -1;
  for (unsigned i = 0; i < n; i++)
    if (b[24 + 16 * i] == 1) {
      k->addr = g64(b + 8);
      k->len = g64(b + 16);
      k->key = g64(b + 32 + 16 * i);
      return 0;
    }
  return -1;
}

/* ---- blocking sockets ---- */

void set_rcvtimeo(int fd, unsigned ms)
{
  struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

int tcp_socket(void)
{
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    abort();
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  struct timeval tv = {.tv_sec = 10};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  return fd;
}

int raw_dial(int port)
{
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  int fd = tcp_socket();
  if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

int wr_all(int fd, const void *b, size_t n)
{
  const uint8_t *p = b;
  while (n) {
    ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
    if (k <= 0)
      return -1;
    p += k, n -= (size_t)k;
  }
  return 0;
}

int rd_all(int fd, void *b, size_t n)
{
  uint8_t *p = b;
  while (n) {
    ssize_t k = recv(fd, p, n, 0);
    if (k <= 0)
      return -1;
    p += k, n -= (size_t)k;
  }
  return 0;
}

int rd_tframe(int fd, uint8_t *kind, uint8_t *body, uint32_t *blen, size_t cap)
{
  uint8_t h[8];
  if (rd_all(fd, h, 8) != 0)
    return -1;
  *kind = h[4];
  *blen = g32(h);
  if (*kind < K_FRAME) {
    if (*blen > cap)
      return -1;
    return rd_all(fd, body, *blen);
  }
  if (*blen > cap - 8 || cap < 8)
    return -1;
  body[0] = (uint8_t)(*kind - K_FRAME);
  body[1] = h[5];
  memcpy(body + 2, h + 6, 2);
  memcpy(body + 4, h, 4);
  *kind = K_FRAME;
  *blen += 8;
  return rd_all(fd, body + 8, *blen - 8);
}

int wait_eof(int fd, unsigned ms)
{
  set_rcvtimeo(fd, ms);
  uint8_t b;
  ssize_t k = recv(fd, &b, 1, 0);
  if (k == 0 || (k < 0 && errno == ECONNRESET))
    return 1;
  return k > 0 ? 0 : -1;
}

int drain_eof(int fd, unsigned ms)
{
  uint64_t t0 = now_ms();
  int rc;
  while ((rc = wait_eof(fd, ms)) == 0)
    if (now_ms() - t0 > ms)
      return -1;
  return rc;
}

int hung_up(int fd)
{
  char c;
  ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}
