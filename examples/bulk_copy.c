/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rmx-bulk-copy: copy a file of any size from one process to another by
 * RDMA READ of the sender's registered pages (the TCP transport emulates the
 * reads where there is no RDMA).
 *
 *   rmx-bulk-copy serve URI FILE     offer FILE to the next client, then exit
 *   rmx-bulk-copy fetch URI OUTFILE  read it into OUTFILE, check the checksum
 *
 * Exit 0 when copied and checked, 1 when it failed, 2 for a bad command
 * line (tool.h).
 *
 * The sender maps the file, registers it for remote reads, and sends one
 * message: size, checksum, packed key. The receiver reads it in 4 MiB
 * pieces, 8 in flight, into 8 buffers it registered once, and writes each
 * piece to OUTFILE at its offset; then it checks the file's checksum and
 * says "done". Memory stays bounded whatever the file size.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <rmx/rmx.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tool.h"

#define PIECE (4u << 20)
#define INFLIGHT 8

static rmx_ctx_t *ctx;
static int failed;

static uint64_t fnv1a(const uint8_t *p, size_t n)
{
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++)
    h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

static double now_s(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void stop_on_close(rmx_conn_t *c, void *arg) { rmx_ctx_stop(ctx); }

static void close_and_stop(rmx_conn_t *c, int status)
{
  if (status)
    failed = 1;
  rmx_conn_close(c, stop_on_close, NULL);
}

/* ---- serve ---- */

static struct {
  uint8_t *map;
  size_t size;
  rmx_mem_t *mem;
  uint8_t msg[16 + RMX_RKEY_MAX];
  size_t msg_len;
  rmx_listener_t *l;
} sv;

static void sv_recv(rmx_conn_t *c, const void *d, size_t len, void *arg)
{
  if (len == 4 && memcmp(d, "done", 4) == 0) {
    printf("serve: the client has the file\n");
    close_and_stop(c, 0);
  }
}

static void sv_disc(rmx_conn_t *c, int st, void *arg)
{
  fprintf(stderr, "rmx-bulk-copy: client went away: %s\n", rmx_strerror(st));
  close_and_stop(c, 1);
}

static void sv_accept(rmx_listener_t *l, rmx_conn_t *c, void *arg)
{
  rmx_conn_cbs_t cbs = {.on_recv = sv_recv, .on_disconnect = sv_disc};
  uint64_t sum = fnv1a(sv.map, sv.size);
  size_t klen = RMX_RKEY_MAX;
  rmx_conn_set_cbs(c, &cbs, NULL);
  rmx_listener_close(sv.l);
  memcpy(sv.msg, &(uint64_t){sv.size}, 8);
  memcpy(sv.msg + 8, &sum, 8);
  if (sv.size) { /* registered now that the connection's transport is in use */
    int rc = rmx_mem_reg(ctx, sv.map, sv.size, RMX_MEM_REMOTE_READ, &sv.mem);
    if (!rc)
      rc = rmx_mem_pack_for(sv.mem, c, sv.msg + 16, &klen); /* for this client alone */
    if (rc) {
      fprintf(stderr, "rmx-bulk-copy: cannot register the file: %s\n", rmx_strerror(rc));
      close_and_stop(c, 1);
      return;
    }
  } else {
    klen = 0;
  }
  sv.msg_len = 16 + klen;
  rmx_send(c, sv.msg, sv.msg_len, NULL, NULL);
}

static int serve(const char *uri, const char *path)
{
  char bound[128];
  int fd = open(path, O_RDONLY);
  struct stat st;
  if (fd < 0 || fstat(fd, &st)) {
    perror(path);
    return 1;
  }
  sv.size = (size_t)st.st_size;
  if (sv.size) {
    /* Private and writable: registration may need to pin writable pages. */
    sv.map = mmap(NULL, sv.size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    if (sv.map == MAP_FAILED) {
      perror("mmap");
      return 1;
    }
  }
  close(fd);
  int rc = rmx_listen(ctx, uri, sv_accept, NULL, &sv.l);
  if (rc)
    return tool_uri_failed("listen on", uri, rc);
  if ((rc = rmx_listener_uri(sv.l, bound, sizeof(bound))) != 0) {
    fprintf(stderr, "rmx-bulk-copy: the bound URI: %s\n", rmx_strerror(rc));
    return 1;
  }
  printf("serve: offering %s (%zu bytes) on %s\n", path, sv.size, bound);
  fflush(stdout);
  rmx_ctx_run(ctx);
  rmx_mem_dereg(sv.mem);
  if (sv.size)
    munmap(sv.map, sv.size);
  return failed;
}

/* ---- fetch ---- */

static struct {
  rmx_conn_t *c;
  const char *path;
  int fd;
  uint8_t *bufs;        /* INFLIGHT pieces, registered once */
  rmx_mem_t *mem;
  int free_slot[INFLIGHT], nfree;
  uint64_t size, sum, next, done_bytes;
  rmx_rkey_t *rk;
  double t0, next_note; /* a progress line on stderr every `every` seconds */
  double every;
} fx;

typedef struct piece {
  int slot;
  uint64_t off;
  size_t len;
} piece_t;

static piece_t pieces[INFLIGHT];

static void fetch_more(void);

static uint64_t file_sum(int fd, uint64_t size)
{
  uint64_t h = 0xcbf29ce484222325ull, off = 0;
  uint8_t *b = fx.bufs;
  while (off < size) {
    ssize_t n = pread(fd, b, PIECE, (off_t)off);
    if (n <= 0)
      return 0;
    for (ssize_t i = 0; i < n; i++)
      h = (h ^ b[i]) * 0x100000001b3ull;
    off += (uint64_t)n;
  }
  return h;
}

static void read_done(rmx_conn_t *c, int st, void *arg)
{
  piece_t *p = arg;
  if (st) {
    fprintf(stderr, "rmx-bulk-copy: read failed: %s\n", rmx_strerror(st));
    close_and_stop(c, 1);
    return;
  }
  if (pwrite(fx.fd, fx.bufs + (size_t)p->slot * PIECE, p->len, (off_t)p->off) != (ssize_t)p->len) {
    perror(fx.path);
    close_and_stop(c, 1);
    return;
  }
  fx.done_bytes += p->len;
  fx.free_slot[fx.nfree++] = p->slot;
  double now = now_s();
  if (now >= fx.next_note && fx.done_bytes < fx.size) {
    if (fx.next_note > 0) /* not before the run has lasted that long */
      fprintf(stderr, "fetch: %" PRIu64 " of %" PRIu64 " MiB (%.0f%%), %.1f MiB/s\n",
              fx.done_bytes >> 20, fx.size >> 20, 100.0 * (double)fx.done_bytes / (double)fx.size,
              (double)fx.done_bytes / (now - fx.t0) / (1 << 20));
    fx.next_note = now + fx.every;
  }
  fetch_more();
}

static void finish(void)
{
  double secs = now_s() - fx.t0;
  uint64_t sum = file_sum(fx.fd, fx.size);
  printf("fetch: %" PRIu64 " bytes in %.3f s, %.1f MiB/s over %s; checksum %016" PRIx64 " %s\n",
         fx.size, secs, secs > 0 ? (double)fx.size / secs / (1 << 20) : 0.0,
         rmx_conn_transport(fx.c), sum,
         sum == fx.sum ? "matches" : "DIFFERS");
  if (sum != fx.sum)
    failed = 1;
  rmx_send(fx.c, "done", 4, NULL, NULL);
  close_and_stop(fx.c, failed);
}

static void fetch_more(void)
{
  while (fx.nfree > 0 && fx.next < fx.size) {
    size_t n = fx.size - fx.next < PIECE ? fx.size - fx.next : PIECE;
    int slot = fx.free_slot[--fx.nfree];
    piece_t *p = &pieces[slot];
    *p = (piece_t){.slot = slot, .off = fx.next, .len = n};
    rmx_iov_t v = {fx.bufs + (size_t)slot * PIECE, n, fx.mem};
    int rc = rmx_read(fx.c, &v, 1, fx.rk, fx.next, read_done, p);
    if (rc) {
      fprintf(stderr, "rmx-bulk-copy: read: %s\n", rmx_strerror(rc));
      close_and_stop(fx.c, 1);
      return;
    }
    fx.next += n;
  }
  if (fx.nfree == INFLIGHT && fx.done_bytes == fx.size)
    finish();
}

static void fx_recv(rmx_conn_t *c, const void *d, size_t len, void *arg)
{
  if (len < 16 || fx.t0 > 0)
    return;
  memcpy(&fx.size, d, 8);
  memcpy(&fx.sum, (const uint8_t *)d + 8, 8);
  fx.fd = open(fx.path, O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (fx.fd < 0 || ftruncate(fx.fd, (off_t)fx.size)) {
    perror(fx.path);
    close_and_stop(c, 1);
    return;
  }
  int rc = 0;
  if (fx.size && (rc = rmx_rkey_unpack(c, (const uint8_t *)d + 16, len - 16, &fx.rk)) != 0) {
    fprintf(stderr, "rmx-bulk-copy: bad offer: %s\n", rmx_strerror(rc));
    close_and_stop(c, 1);
    return;
  }
  if ((rc = rmx_mem_reg(ctx, fx.bufs, (size_t)INFLIGHT * PIECE, RMX_MEM_LOCAL, &fx.mem)) != 0) {
    fprintf(stderr, "rmx-bulk-copy: cannot register buffers: %s\n", rmx_strerror(rc));
    close_and_stop(c, 1);
    return;
  }
  fx.t0 = now_s();
  fetch_more();
}

static void fx_disc(rmx_conn_t *c, int st, void *arg) { close_and_stop(c, 1); }

static void fx_connected(rmx_conn_t *c, int st, void *arg)
{
  rmx_conn_cbs_t cbs = {.on_recv = fx_recv, .on_disconnect = fx_disc};
  if (st) {
    fprintf(stderr, "rmx-bulk-copy: connect: %s\n", rmx_strerror(st));
    close_and_stop(c, 1);
    return;
  }
  rmx_conn_set_cbs(c, &cbs, NULL);
}

static int fetch(const char *uri, const char *path)
{
  fx.path = path;
  fx.fd = -1;
  fx.bufs = malloc((size_t)INFLIGHT * PIECE);
  for (int i = 0; i < INFLIGHT; i++)
    fx.free_slot[fx.nfree++] = i;
  if (!fx.bufs) {
    fprintf(stderr, "rmx-bulk-copy: no memory for %d pieces of %u bytes\n", INFLIGHT, PIECE);
    return 1;
  }
  int rc = rmx_connect(ctx, uri, fx_connected, NULL, &fx.c);
  if (rc) {
    free(fx.bufs);
    return tool_uri_failed("connect to", uri, rc);
  }
  rmx_ctx_run(ctx);
  if (fx.rk)
    rmx_rkey_release(fx.rk);
  rmx_mem_dereg(fx.mem);
  if (fx.fd >= 0)
    close(fx.fd);
  free(fx.bufs);
  return failed;
}

static const char usage[] =
    "usage: rmx-bulk-copy serve URI FILE     offer FILE to one client, zero-copy\n"
    "       rmx-bulk-copy fetch URI OUTFILE [PROGRESS_MS]\n"
    "                                        copy the served file into OUTFILE, with a\n"
    "                                        progress line on stderr every PROGRESS_MS\n"
    "                                        (1000; 1 to 3600000) once the copy lasts\n"
    "                                        that long\n"
    "       rmx-bulk-copy --help | --version\n"
    "  URI: tcp://HOST:PORT, rdma://HOST:PORT or auto://HOST:PORT. Rates in MiB/s\n"
    "  (2^20 bytes a second). Exit 0: copied and checked; 1: it failed; 2: a bad\n"
    "  command line.\n";

int main(int argc, char **argv)
{
  int first = tool_options(argc, argv, usage), n = argc - first;
  char **op = argv + first;
  if (n < 1)
    tool_bad("serve or fetch, a URI and a file");
  if (strcmp(op[0], "serve") && strcmp(op[0], "fetch"))
    tool_bad("'%s' is neither serve nor fetch", op[0]);
  int fetching = strcmp(op[0], "fetch") == 0;
  if (n < 3 || n > 3 + fetching)
    tool_bad("%s takes %s", op[0], fetching ? "a URI, an OUTFILE and at most PROGRESS_MS"
                                            : "a URI and a FILE");
  tool_uri("URI", op[1]);
  fx.every = 1.0;
  if (n == 4)
    fx.every = (double)tool_num("PROGRESS_MS", op[3], 1, 3600000) / 1000.0;
  int rc = rmx_ctx_create(&ctx, NULL, NULL);
  if (rc) {
    fprintf(stderr, "rmx-bulk-copy: %s\n", rmx_strerror(rc));
    return 1;
  }
  rc = strcmp(op[0], "serve") == 0 ? serve(op[1], op[2]) : fetch(op[1], op[2]);
  rmx_ctx_destroy(ctx);
  return rc;
}
