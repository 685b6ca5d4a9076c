/* SPDX-License-Identifier: BSD-3-Clause */
/* Configuration: the settings table and everything that reads it. */
#include <ctype.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config.h"
#include "rmx_int.h"

/* Largest configurable message (the other limits are in rmx_int.h: a
 * peer's hello must respect them too). */
#define RMX_MSG_MAX (1ull << 40)

static const char *const levels[] = {"none", "error", "warn", "info", "debug", "trace"};
static const char *const modes[] = {"event", "poll", "adaptive"};
static const char *const scopes[] = {"auto", "windows", "pd"};
static const char *const srq_modes[] = {"0", "1", "auto"};

#define FIELD(f) #f, offsetof(rmx_config_t, f), sizeof(((rmx_config_t *)0)->f)
#define NUM(env, f, def, lo, hi, desc) {env, FIELD(f), RMX__SET_NUM, def, lo, hi, NULL, desc}
#define SIZE(env, f, def, lo, hi, desc) {env, FIELD(f), RMX__SET_SIZE, def, lo, hi, NULL, desc}

/* In rmx_config_t's order. The variable names are spelled out: tests and
 * docs/tuning.md are checked against them. */
const rmx__setting_t rmx__settings[] = {
  SIZE("RMX_EAGER_SIZE", eager_size, 8192, RMX_EAGER_MIN, RMX_EAGER_MAX,
       "Bytes per eager receive buffer, header included: messages that fit are copied into "
       "it, larger ones go by rendezvous."),
  NUM("RMX_RX_DEPTH", rx_depth, 64, RMX_DEPTH_MIN, RMX_DEPTH_MAX,
      "Receive buffers per connection, which are also the credits: the eager messages a "
      "sender may have in flight."),
  SIZE("RMX_MAX_MSG_SIZE", max_msg_size, 64ull << 20, 1, RMX_MSG_MAX,
       "The largest message this side sends or accepts; larger ones fail with RMX_EMSGSIZE."),
  NUM("RMX_RNDV_DEPTH", rndv_depth, 4, 1, 1024,
      "Large (rendezvous) messages a connection fetches at once."),
  NUM("RMX_CONNECT_TIMEOUT_MS", connect_timeout_ms, 10000, 1, 3600000,
      "Time limit of a connect and its handshake, in ms."),
  NUM("RMX_RPC_MAX", rpc_max_inflight, 1024, 1, 1u << 20,
      "RPC calls outstanding per connection, each way; further calls get RMX_EAGAIN."),
  NUM("RMX_RNR_RETRY", rnr_retry, 7, 0, 7,
      "RDMA receiver-not-ready retries, 7 = forever; credits make them unnecessary, and 0 "
      "turns any into an error."),
  {"RMX_LOG", FIELD(log_level), RMX__SET_WORD, RMX_LOG_WARN, 0, RMX_LOG_TRACE, levels,
   "Which log lines are written (rmx_log_set_handler routes them); none silences rmx."},
  {"RMX_PROGRESS", FIELD(progress), RMX__SET_WORD, RMX_PROGRESS_EVENT, 0, RMX_PROGRESS_ADAPTIVE,
   modes,
   "How completions are found: sleep until woken (event), busy-poll (poll), or poll for "
   "RMX_SPIN_US after the last activity, then sleep (adaptive)."},
  {"RMX_DEVICE", FIELD(device), RMX__SET_STR, 0, 0, 0, NULL,
   "The RDMA device to use, by name or GUID; empty: the one the route to the address names."},
  NUM("RMX_CLOSE_TIMEOUT_MS", close_timeout_ms, 5000, 1, 3600000,
      "How long an orderly close waits for the peer before the connection is cut, in ms."),
  NUM("RMX_MAX_CONNS", max_conns, 1024, 1, 1u << 20,
      "Connections a listener keeps at once; more are refused, unless RMX_EVICT_IDLE makes room."),
  NUM("RMX_MAX_HANDSHAKES", max_handshakes, 128, 1, 1u << 16,
      "Connections in their handshake at once, per listener; more wait in the kernel's "
      "listen backlog (TCP) or are refused (RDMA)."),
  NUM("RMX_RMA_WINDOW", rma_window, 64, 1, RMX_RMA_WINDOW_MAX,
      "Remote reads, writes and atomics a peer may have outstanding here (TCP)."),
  {"RMX_AUTH_SECRET_FILE", FIELD(auth_secret), RMX__SET_SECRET, 0, 0, 0, NULL,
   "A file of 1 to 63 bytes, all of them (any values) the shared secret every peer must "
   "prove it holds; unset: no peer authentication (docs/security.md)."},
  NUM("RMX_KEEPALIVE_MS", keepalive_ms, 1000, 0, 3600000,
      "How often an idle connection sends a keepalive and checks the peer's silence, in ms; "
      "0 turns this side's checks off."),
  NUM("RMX_KEEPALIVE_TIMEOUT_MS", keepalive_timeout_ms, 10000, RMX_SILENCE_MIN, 86400000,
      "How long a peer may stay silent, or hold back credits, before it is declared lost, in "
      "ms; at least RMX_KEEPALIVE_MS, and not used when that is 0."),
  NUM("RMX_RC_TIMEOUT_MS", rc_timeout_ms, 500, 1, 3600000,
      "The RDMA acknowledgement timeout in ms, rounded up to the device's 4.096 us * 2^t."),
  NUM("RMX_RC_RETRY", rc_retry, 5, 0, 6,
      "Resends of an unacknowledged RDMA request before the connection fails."),
  NUM("RMX_REGCACHE", regcache, 1, 0, 1,
      "The registration cache: 1 reuses registrations, 0 registers each transfer anew."),
  NUM("RMX_SPIN_US", spin_us, 100, 1, 1000000,
      "Adaptive progress: how long the loop polls after the last activity before it sleeps, "
      "in us."),
  NUM("RMX_GUARD_STRIKES", guard_strikes, 16, 0, 1000000,
      "Refused remote accesses (bad key, bounds or rights) from one peer address within "
      "RMX_GUARD_WINDOW_MS that get its new connections refused; 0 turns this off."),
  NUM("RMX_GUARD_WINDOW_MS", guard_window_ms, 10000, 1, 86400000,
      "The window in which RMX_GUARD_STRIKES refused remote accesses ban a peer address, in ms."),
  NUM("RMX_GUARD_BAN_MS", guard_ban_ms, 30000, 1, 86400000,
      "How long a banned peer address's new connections are refused, in ms."),
  {"RMX_KEY_SCOPE", FIELD(key_scope), RMX__SET_WORD, RMX_KEY_SCOPE_AUTO, 0, RMX_KEY_SCOPE_PD,
   scopes,
   "How RDMA keys are confined to one connection: memory windows (windows), a protection "
   "domain per connection (pd; no rmx_mem_pack capability keys), or windows where the "
   "device has them, else pd (auto)."},
  NUM("RMX_HANDSHAKE_TIMEOUT_MS", handshake_timeout_ms, 3000, 1, 3600000,
      "How long an incoming connection may take over its handshake before it is dropped, in "
      "ms: a peer that connects and says nothing holds a handshake slot no longer."),
  {"RMX_SRQ", FIELD(srq), RMX__SET_WORD, RMX_SRQ_AUTO, 0, RMX_SRQ_AUTO, srq_modes,
   "Verbs receive buffers: each connection its own (0), one shared receive queue per device "
   "(1), or their own for a device's first 4 connections and shared after (auto)."},
  NUM("RMX_SRQ_DEPTH", srq_depth, 1024, 16, 1u << 20,
      "Receive buffers of a shared receive queue (RMX_SRQ), each RMX_EAGER_SIZE bytes; the "
      "device may allow fewer."),
  NUM("RMX_IDLE_TIMEOUT_MS", idle_timeout_ms, 0, 0, 86400000,
      "Close a connection that has carried no message (either way) for this long, in ms; "
      "keepalives and credit returns do not count; 0: never."),
  NUM("RMX_EVICT_IDLE", evict_idle, 0, 0, 1,
      "A listener at RMX_MAX_CONNS closes its established connection that has carried no "
      "message for the longest (its on_disconnect gets RMX_ECANCELED) to let a new peer in "
      "(1), or refuses the new peer (0)."),
  NUM("RMX_SQ_DEPTH", sq_depth, 0, 0, 1u << 16,
      "Send queue entries per RDMA connection (what it has posted at once; more wait in rmx); "
      "0: 2 x RMX_RX_DEPTH + 2 x RMX_RNDV_DEPTH + 8, or 6 on the shared receive queue; "
      "at least 3 (reads and writes go in parts of half the queue's worth)."),
  {"RMX_TRANSPORTS", FIELD(transports), RMX__SET_STR, 0, 0, 0, NULL,
   "The transports auto:// tries per connection, best first, and the listeners a listener "
   "adds; empty: shm,rdma,tcp. One alone with ! after it (rdma!) is required: no fall back."},
  NUM("RMX_SHM_COPY", shm_copy, 1, 0, 1,
      "Shared memory: large remote reads and writes move with one copy between the two "
      "processes where each may reach the other's memory anyway (1), or all through the "
      "segment (0)."),
};
const size_t rmx__nsettings = sizeof(rmx__settings) / sizeof(rmx__settings[0]);
_Static_assert(sizeof(rmx__settings) / sizeof(rmx__settings[0]) <= RMX__NSETTINGS_MAX,
               "raise RMX__NSETTINGS_MAX");

/* The rules between settings: big >= small unless small is 0. */
static const struct {
  const char *big, *small, *why;
} at_least[] = {
  {"RMX_KEEPALIVE_TIMEOUT_MS", "RMX_KEEPALIVE_MS",
   "the peer would be declared lost between two keepalives (RMX_KEEPALIVE_MS=0 turns the "
   "checks off)"},
};

const rmx__setting_t *rmx__setting_find(const char *env)
{
  for (size_t i = 0; i < rmx__nsettings; i++)
    if (strcmp(rmx__settings[i].env, env) == 0)
      return &rmx__settings[i];
  return NULL;
}

static int is_num(const rmx__setting_t *s) { return s->type <= RMX__SET_WORD; }

uint64_t rmx__setting_get(const rmx_config_t *c, const rmx__setting_t *s)
{
  const char *p = (const char *)c + s->offset;
  if (s->width == 8) {
    uint64_t x;
    memcpy(&x, p, 8);
    return x;
  }
  uint32_t x; /* enums are int-sized: a negative one reads as out of range */
  memcpy(&x, p, 4);
  return x;
}

static void set_num(rmx_config_t *c, const rmx__setting_t *s, uint64_t x)
{
  char *p = (char *)c + s->offset;
  if (s->width == 8) {
    memcpy(p, &x, 8);
  } else {
    uint32_t y = (uint32_t)x;
    memcpy(p, &y, 4);
  }
}

static void word_list(const rmx__setting_t *s, char *buf, size_t len)
{
  buf[0] = '\0';
  for (uint64_t i = 0; i <= s->max; i++)
    snprintf(buf + strlen(buf), len - strlen(buf), "%s%s", i ? ", " : "", s->words[i]);
}

enum { NUM_OK, NUM_SYNTAX, NUM_RANGE };

/* Decimal only: "010" is ten; "0x10", "+1", " 1" and "1.5" do not parse.
 * A number or a suffix product past 64 bits is out of range, never wrapped. */
static int parse_decimal(const char *v, int suffix, uint64_t *out)
{
  const char *p = v + (v[0] == '-');
  uint64_t x = 0;
  int over = 0;
  if (*p < '0' || *p > '9')
    return NUM_SYNTAX;
  for (; *p >= '0' && *p <= '9'; p++) {
    unsigned d = (unsigned)(*p - '0');
    if (x > (UINT64_MAX - d) / 10)
      over = 1;
    else
      x = x * 10 + d;
  }
  /* toupper never makes a NUL of a character, so strchr never matches the
   * terminator (a trailing space is a syntax error, not a 2^50 multiplier) */
  const char *units = "KMGT", *u = *p && suffix ? strchr(units, toupper((unsigned char)*p)) : NULL;
  if (u) {
    unsigned shift = 10 * (unsigned)(u - units + 1);
    if (x > UINT64_MAX >> shift)
      over = 1;
    else
      x <<= shift;
    p++;
  }
  if (*p)
    return NUM_SYNTAX;
  if (over || v[0] == '-')
    return NUM_RANGE;
  *out = x;
  return NUM_OK;
}

int rmx__setting_parse(const rmx__setting_t *s, const char *text, uint64_t *out, char *msg,
                       size_t msglen)
{
  if (s->type == RMX__SET_WORD) {
    for (uint64_t i = 0; i <= s->max; i++)
      if (strcasecmp(text, s->words[i]) == 0) {
        *out = i;
        return 0;
      }
    char list[128];
    word_list(s, list, sizeof(list));
    snprintf(msg, msglen, "%s=%s is not one of: %s", s->env, text, list);
    return RMX_EINVAL;
  }
  uint64_t x = 0;
  int r = parse_decimal(text, s->type == RMX__SET_SIZE, &x);
  if (r == NUM_SYNTAX) {
    snprintf(msg, msglen, "%s=%s is not a decimal number%s", s->env, text,
             s->type == RMX__SET_SIZE ? " (a K, M, G or T suffix may follow it)" : "");
    return RMX_EINVAL;
  }
  if (r == NUM_RANGE || x < s->min || x > s->max) {
    snprintf(msg, msglen, "%s=%s is out of range: %" PRIu64 " .. %" PRIu64, s->env, text, s->min,
             s->max);
    return RMX_EINVAL;
  }
  *out = x;
  return 0;
}

/* Edit distance between a and b (short names: a row on the stack). */
static size_t distance(const char *a, size_t la, const char *b)
{
  size_t lb = strlen(b), row[64];
  if (lb >= 64)
    return (size_t)-1;
  for (size_t j = 0; j <= lb; j++)
    row[j] = j;
  for (size_t i = 1; i <= la; i++) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= lb; j++) {
      size_t up = row[j], best = diag + (a[i - 1] != b[j - 1]);
      if (up + 1 < best)
        best = up + 1;
      if (row[j - 1] + 1 < best)
        best = row[j - 1] + 1;
      diag = up;
      row[j] = best;
    }
  }
  return row[lb];
}

extern char **environ;

/* A typo such as RMX_EAGERSIZE would otherwise be ignored without a word.
 * Once per process, and only once it could be seen (not under RMX_LOG=none). */
static void warn_unknown_vars(void)
{
  static atomic_int done;
  if (atomic_exchange(&done, 1))
    return;
  for (char **e = environ; e && *e; e++) {
    const char *eq = strchr(*e, '=');
    size_t len = eq ? (size_t)(eq - *e) : strlen(*e), best_d = (size_t)-1;
    const char *best = NULL;
    if (strncmp(*e, "RMX_", 4) != 0 || strncmp(*e, "RMX_TEST_", 9) == 0)
      continue;
    for (size_t k = 0; k < rmx__nsettings; k++) {
      const char *name = rmx__settings[k].env;
      if (strlen(name) == len && strncmp(*e, name, len) == 0) {
        best = NULL;
        best_d = 0;
        break;
      }
      size_t d = distance(*e, len, name);
      if (d < best_d)
        best_d = d, best = name;
    }
    if (best_d == 0)
      continue;
    if (best && best_d <= 3)
      rmx__log(RMX_LOG_WARN, "%.*s is not an rmx setting (did you mean %s?)", (int)len, *e, best);
    else
      rmx__log(RMX_LOG_WARN, "%.*s is not an rmx setting", (int)len, *e);
  }
}

static void config_defaults(rmx_config_t *cfg)
{
  memset(cfg, 0, sizeof(*cfg));
  for (size_t i = 0; i < rmx__nsettings; i++)
    if (is_num(&rmx__settings[i]))
      set_num(cfg, &rmx__settings[i], rmx__settings[i].def);
  cfg->size = sizeof(*cfg);
}

/* The rules between fields, each line naming both settings. */
static int check_rules(const rmx_config_t *c, int level)
{
  int rc = 0;
  for (size_t i = 0; i < sizeof(at_least) / sizeof(at_least[0]); i++) {
    const rmx__setting_t *big = rmx__setting_find(at_least[i].big),
                         *small = rmx__setting_find(at_least[i].small);
    uint64_t b = rmx__setting_get(c, big), s = rmx__setting_get(c, small);
    if (s == 0 || b >= s)
      continue;
    RMX_LOG_AT(level, ERROR,
               "%s=%" PRIu64 " (%s) is less than %s=%" PRIu64 " (%s): %s", big->env, b,
               big->field, small->env, s, small->field, at_least[i].why);
    rc = RMX_EINVAL;
  }
  return rc;
}

int rmx__config_env(rmx_config_t *cfg, uint8_t *src, int quiet)
{
  char msg[400];
  uint64_t x;
  int rc = 0;
  config_defaults(cfg);
  /* RMX_LOG first: it decides what the others may log. */
  const char *v = getenv("RMX_LOG");
  if (v && *v && rmx__setting_parse(rmx__setting_find("RMX_LOG"), v, &x, msg, sizeof(msg)) == 0)
    cfg->log_level = (rmx_log_level_t)x;
  int level = quiet ? RMX_LOG_NONE : (int)cfg->log_level;

  for (size_t i = 0; i < rmx__nsettings; i++) {
    const rmx__setting_t *s = &rmx__settings[i];
    int bad = 0;
    if (src)
      src[i] = RMX__SRC_DEFAULT;
    if (!(v = getenv(s->env)) || !*v)
      continue;
    if (s->type == RMX__SET_SECRET) {
      /* It logs why at cfg's level; quietly, the file is only checked: the
       * secret it holds stays out of a configuration made to be printed. */
      rmx_config_t t = *cfg;
      t.log_level = quiet ? RMX_LOG_NONE : cfg->log_level;
      bad = rmx__auth_config(quiet ? &t : cfg) != 0;
      explicit_bzero(t.auth_secret, sizeof(t.auth_secret));
    } else if (s->type == RMX__SET_STR) {
      size_t len = strlen(v);
      if ((bad = len >= s->width))
        RMX_LOG_AT(level, ERROR, "%s=%s is %zu bytes long: at most %u", s->env, v, len,
                   s->width - 1u);
      else
        memcpy((char *)cfg + s->offset, v, len + 1);
    } else if ((bad = rmx__setting_parse(s, v, &x, msg, sizeof(msg)) != 0)) {
      RMX_LOG_AT(level, ERROR, "%s", msg);
    } else {
      set_num(cfg, s, x);
    }
    if (src)
      src[i] = bad ? RMX__SRC_REFUSED : RMX__SRC_ENV;
    if (bad)
      rc = RMX_EINVAL;
  }
  if (rc == 0)
    rc = check_rules(cfg, level);
  if (level >= RMX_LOG_WARN)
    warn_unknown_vars();
  return rc;
}

int rmx_config_init(rmx_config_t *cfg)
{
  if (!cfg)
    return RMX_EINVAL;
  return rmx__config_env(cfg, NULL, 0);
}

/* rmx_config_t as 0.1 laid it out: the smallest size a caller can have. */
#define CONFIG_SIZE_0_1 (offsetof(rmx_config_t, regcache) + sizeof(uint32_t))

int rmx__config_take(rmx_config_t *out, const rmx_config_t *cfg)
{
  if (cfg->size < CONFIG_SIZE_0_1 || cfg->size > sizeof(*out)) {
    rmx__log(RMX_LOG_ERROR, "rmx_config_t of %u bytes: %s", cfg->size,
             cfg->size > sizeof(*out) ? "built against a newer rmx than this library"
                                      : "not filled by rmx_config_init()");
    return RMX_EINVAL;
  }
  config_defaults(out);
  memcpy(out, cfg, cfg->size);
  out->size = sizeof(*out);
  return 0;
}

/* Whether setting s is the larger side of a rule whose smaller side is 0
 * (the feature is off): then s is not used, and any value passes. */
static int unused(const rmx_config_t *c, const rmx__setting_t *s)
{
  for (size_t i = 0; i < sizeof(at_least) / sizeof(at_least[0]); i++)
    if (strcmp(s->env, at_least[i].big) == 0 &&
        rmx__setting_get(c, rmx__setting_find(at_least[i].small)) == 0)
      return 1;
  return 0;
}

int rmx__config_check(const rmx_config_t *c)
{
  /* A log level out of range is itself reported. */
  int level = (unsigned)c->log_level <= RMX_LOG_TRACE ? (int)c->log_level : RMX_LOG_ERROR;
  int rc = 0;
  for (size_t i = 0; i < rmx__nsettings; i++) {
    const rmx__setting_t *s = &rmx__settings[i];
    if (!is_num(s)) {
      if (!memchr((const char *)c + s->offset, '\0', s->width)) {
        RMX_LOG_AT(level, ERROR, "rmx_config_t.%s (%s) has no NUL in its %u bytes", s->field,
                   s->env, s->width);
        rc = RMX_EINVAL;
      }
      continue;
    }
    uint64_t x = rmx__setting_get(c, s);
    if ((x < s->min || x > s->max) && !unused(c, s)) {
      RMX_LOG_AT(level, ERROR,
                 "rmx_config_t.%s (%s) = %" PRIu64 " is out of range: %" PRIu64 " .. %" PRIu64,
                 s->field, s->env, x, s->min, s->max);
      rc = RMX_EINVAL;
    }
  }
  const char *why;
  if (rc == 0 && rmx__tp_order(c->transports, NULL, NULL, &why) < 0) {
    RMX_LOG_AT(level, ERROR, "RMX_TRANSPORTS=%s: %s", c->transports, why);
    rc = RMX_EINVAL;
  }
  if (rc == 0)
    rc = check_rules(c, level);
  return rc;
}
