/* SPDX-License-Identifier: BSD-3-Clause */
/* Context: configuration, the loop, deferred work, cross-thread posts. */
#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "rmx_int.h"

typedef struct rmx__post {
  rmx_list_t link;
  rmx_post_fn fn;
  void *arg;
} rmx__post_t;

/* ---- configuration ---- */

static int env_u64(const char *name, uint64_t min, uint64_t max, uint64_t *out)
{
  const char *v = getenv(name);
  if (!v || !*v)
    return 0;
  char *end;
  unsigned long long x = strtoull(v, &end, 0);
  /* K, M, G suffixes: sizes are easier to read that way */
  if (*end == 'K' || *end == 'k') x <<= 10, end++;
  else if (*end == 'M' || *end == 'm') x <<= 20, end++;
  else if (*end == 'G' || *end == 'g') x <<= 30, end++;
  if (*end != '\0' || v[0] == '-' || x < min || x > max) {
    rmx__log(RMX_LOG_ERROR, "%s=%s is not a number in [%" PRIu64 ", %" PRIu64 "]", name, v, min,
             max);
    return RMX_EINVAL;
  }
  *out = x;
  return 0;
}

static int env_u32(const char *name, uint32_t min, uint32_t max, uint32_t *out)
{
  uint64_t x = *out;
  int rc = env_u64(name, min, max, &x);
  *out = (uint32_t)x;
  return rc;
}

static int env_word(const char *name, const char *const *words, int n, int *out)
{
  const char *v = getenv(name);
  if (!v || !*v)
    return 0;
  for (int i = 0; i < n; i++)
    if (strcasecmp(v, words[i]) == 0) {
      *out = i;
      return 0;
    }
  char list[128] = "";
  for (int i = 0; i < n; i++)
    snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s", i ? ", " : "", words[i]);
  rmx__log(RMX_LOG_ERROR, "%s=%s is not one of: %s", name, v, list);
  return RMX_EINVAL;
}

/* Every variable rmx reads; RMX_TEST_* belong to its test programs. */
static const char *const known_vars[] = {
  "RMX_EAGER_SIZE", "RMX_RX_DEPTH", "RMX_MAX_MSG_SIZE", "RMX_RNDV_DEPTH",
  "RMX_CONNECT_TIMEOUT_MS", "RMX_RPC_MAX", "RMX_RNR_RETRY", "RMX_CLOSE_TIMEOUT_MS",
  "RMX_MAX_CONNS", "RMX_MAX_HANDSHAKES", "RMX_RMA_WINDOW", "RMX_KEEPALIVE_MS",
  "RMX_KEEPALIVE_TIMEOUT_MS", "RMX_RC_TIMEOUT_MS", "RMX_RC_RETRY", "RMX_LOG", "RMX_PROGRESS",
  "RMX_DEVICE", "RMX_REGCACHE", "RMX_AUTH_SECRET_FILE", "RMX_SPIN_US",
};
#define NKNOWN (sizeof(known_vars) / sizeof(known_vars[0]))

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

/* A typo such as RMX_EAGERSIZE would otherwise be ignored without a word. */
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
    for (size_t k = 0; k < NKNOWN; k++) {
      if (strlen(known_vars[k]) == len && strncmp(*e, known_vars[k], len) == 0) {
        best = NULL;
        best_d = 0;
        break;
      }
      size_t d = distance(*e, len, known_vars[k]);
      if (d < best_d)
        best_d = d, best = known_vars[k];
    }
    if (best_d == 0)
      continue;
    if (best && best_d <= 3)
      rmx__log(RMX_LOG_WARN, "%.*s is not an rmx setting (did you mean %s?)", (int)len, *e, best);
    else
      rmx__log(RMX_LOG_WARN, "%.*s is not an rmx setting", (int)len, *e);
  }
}

/* Largest configurable message (the other limits are in rmx_int.h: a
 * peer's hello must respect them too). */
#define RMX_MSG_MAX (1ull << 40)

static void config_defaults(rmx_config_t *cfg)
{
  memset(cfg, 0, sizeof(*cfg));
  cfg->eager_size = 8192;
  cfg->rx_depth = 64;
  cfg->max_msg_size = 64ull << 20;
  cfg->rndv_depth = 4;
  cfg->connect_timeout_ms = 10000;
  cfg->rpc_max_inflight = 1024;
  cfg->rnr_retry = 7;
  cfg->close_timeout_ms = 5000;
  cfg->max_conns = 1024;
  cfg->max_handshakes = 128;
  cfg->rma_window = 64;
  cfg->keepalive_ms = 1000;
  cfg->keepalive_timeout_ms = 10000;
  cfg->rc_timeout_ms = 500;
  cfg->rc_retry = 5;
  cfg->regcache = 1;
  cfg->log_level = RMX_LOG_WARN;
  cfg->progress = RMX_PROGRESS_EVENT;
  cfg->spin_us = 100;
  cfg->size = sizeof(*cfg);
}

int rmx_config_init(rmx_config_t *cfg)
{
  static const char *const levels[] = {"none", "error", "warn", "info", "debug", "trace"};
  static const char *const modes[] = {"event", "poll", "adaptive"};
  int lvl = RMX_LOG_WARN, mode = RMX_PROGRESS_EVENT, rc = 0;

  if (!cfg)
    return RMX_EINVAL;
  config_defaults(cfg);

  rc |= env_u32("RMX_EAGER_SIZE", RMX_EAGER_MIN, RMX_EAGER_MAX, &cfg->eager_size);
  rc |= env_u32("RMX_RX_DEPTH", RMX_DEPTH_MIN, RMX_DEPTH_MAX, &cfg->rx_depth);
  rc |= env_u64("RMX_MAX_MSG_SIZE", 1, RMX_MSG_MAX, &cfg->max_msg_size);
  rc |= env_u32("RMX_RNDV_DEPTH", 1, 1024, &cfg->rndv_depth);
  rc |= env_u32("RMX_CONNECT_TIMEOUT_MS", 1, 3600000, &cfg->connect_timeout_ms);
  rc |= env_u32("RMX_RPC_MAX", 1, 1u << 20, &cfg->rpc_max_inflight);
  rc |= env_u32("RMX_RNR_RETRY", 0, 7, &cfg->rnr_retry);
  rc |= env_u32("RMX_CLOSE_TIMEOUT_MS", 1, 3600000, &cfg->close_timeout_ms);
  rc |= env_u32("RMX_MAX_CONNS", 1, 1u << 20, &cfg->max_conns);
  rc |= env_u32("RMX_MAX_HANDSHAKES", 1, 1u << 16, &cfg->max_handshakes);
  rc |= env_u32("RMX_RMA_WINDOW", 1, RMX_RMA_WINDOW_MAX, &cfg->rma_window);
  rc |= env_u32("RMX_KEEPALIVE_MS", 0, 3600000, &cfg->keepalive_ms);
  rc |= env_u32("RMX_KEEPALIVE_TIMEOUT_MS", RMX_SILENCE_MIN, 86400000, &cfg->keepalive_timeout_ms);
  rc |= env_u32("RMX_RC_TIMEOUT_MS", 1, 3600000, &cfg->rc_timeout_ms);
  rc |= env_u32("RMX_RC_RETRY", 0, 6, &cfg->rc_retry);
  rc |= env_u32("RMX_REGCACHE", 0, 1, &cfg->regcache);
  rc |= env_word("RMX_LOG", levels, 6, &lvl);
  rc |= env_word("RMX_PROGRESS", modes, 3, &mode);
  rc |= env_u32("RMX_SPIN_US", 1, 1000000, &cfg->spin_us);
  const char *dev = getenv("RMX_DEVICE");
  if (dev)
    snprintf(cfg->device, sizeof(cfg->device), "%s", dev);
  cfg->log_level = (rmx_log_level_t)lvl;
  cfg->progress = (rmx_progress_t)mode;
  rc |= rmx__auth_config(cfg); /* RMX_AUTH_SECRET_FILE */
  warn_unknown_vars();
  return rc ? RMX_EINVAL : 0;
}

/* rmx_config_t as 0.1 laid it out: the smallest size a caller can have. */
#define CONFIG_SIZE_0_1 (offsetof(rmx_config_t, regcache) + sizeof(uint32_t))

/* The caller's configuration, as large as its header knew it; the fields
 * it did not know get their defaults. */
static int config_take(rmx_config_t *out, const rmx_config_t *cfg)
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

static int config_check(const rmx_config_t *c)
{
  if (c->eager_size < RMX_EAGER_MIN || c->eager_size > RMX_EAGER_MAX)
    return RMX_EINVAL;
  if (c->rx_depth < RMX_DEPTH_MIN || c->rx_depth > RMX_DEPTH_MAX)
    return RMX_EINVAL;
  if (c->max_msg_size == 0 || c->max_msg_size > RMX_MSG_MAX || c->rndv_depth == 0 ||
      c->connect_timeout_ms == 0 || c->rpc_max_inflight == 0 || c->rnr_retry > 7 ||
      c->close_timeout_ms == 0 || c->max_conns == 0 || c->max_handshakes == 0 ||
      c->rma_window == 0 || c->rma_window > RMX_RMA_WINDOW_MAX || c->rc_timeout_ms == 0 ||
      c->rc_retry > 6 || c->regcache > 1 || c->spin_us == 0 || c->spin_us > 1000000)
    return RMX_EINVAL;
  if (c->keepalive_ms && (c->keepalive_timeout_ms < RMX_SILENCE_MIN ||
                          c->keepalive_timeout_ms < c->keepalive_ms))
    return RMX_EINVAL;
  if ((unsigned)c->log_level > RMX_LOG_TRACE || (unsigned)c->progress > RMX_PROGRESS_ADAPTIVE)
    return RMX_EINVAL;
  return 0;
}


/* ---- cross-thread posts ---- */

static void async_cb(uv_async_t *h)
{
  rmx_ctx_t *ctx = h->data;
  rmx_list_t batch;
  ctx->in_cb++;
  rmx_list_init(&batch);
  uv_mutex_lock(&ctx->post_lock);
  rmx_list_splice(&batch, &ctx->posted);
  uv_mutex_unlock(&ctx->post_lock);
  rmx_list_t *n;
  while ((n = rmx_list_pop(&batch)) != NULL) {
    rmx__post_t *p = rmx_container_of(n, rmx__post_t, link);
    p->fn(p->arg);
    free(p);
  }
  ctx->in_cb--;
}

int rmx_ctx_post(rmx_ctx_t *ctx, rmx_post_fn fn, void *arg)
{
  if (!ctx || !fn)
    return RMX_EINVAL;
  rmx__post_t *p = malloc(sizeof(*p));
  if (!p)
    return RMX_ENOMEM;
  p->fn = fn;
  p->arg = arg;
  uv_mutex_lock(&ctx->post_lock);
  if (ctx->destroying) {
    uv_mutex_unlock(&ctx->post_lock);
    free(p);
    return RMX_ECANCELED;
  }
  rmx_list_push(&ctx->posted, &p->link);
  uv_async_send(&ctx->async);
  uv_mutex_unlock(&ctx->post_lock);
  return 0;
}


/* ---- context ---- */

/*
 * libuv writes to sockets with write(2), so writing to a peer that went
 * away raises SIGPIPE, whose default action ends the process: any peer
 * could kill an rmx server. If the program left SIGPIPE at its default,
 * rmx ignores it (process-wide; write errors are reported as usual); a
 * disposition the program chose is left alone.
 */
static void sigpipe_ignore(void)
{
  struct sigaction sa;
  if (sigaction(SIGPIPE, NULL, &sa) == 0 && !(sa.sa_flags & SA_SIGINFO) &&
      sa.sa_handler == SIG_DFL)
    signal(SIGPIPE, SIG_IGN);
}

static void conn_freed(rmx_ctx_t *ctx);

int rmx_ctx_create(rmx_ctx_t **out, struct uv_loop_s *loop, const rmx_config_t *cfg)
{
  rmx_ctx_t *ctx;
  int rc;

  if (!out)
    return RMX_EINVAL;
  ctx = calloc(1, sizeof(*ctx));
  if (!ctx)
    return RMX_ENOMEM;
  if ((rc = cfg ? config_take(&ctx->cfg, cfg) : rmx_config_init(&ctx->cfg)) != 0)
    goto err_free;
  if ((rc = config_check(&ctx->cfg)) != 0 || (rc = rmx__auth_ctx_init(ctx)) != 0)
    goto err_free;
  sigpipe_ignore();

  if (loop) {
    ctx->loop = loop;
  } else {
    if (uv_loop_init(&ctx->own_loop)) {
      rc = RMX_ENOMEM;
      goto err_free;
    }
    ctx->loop = &ctx->own_loop;
    ctx->owns_loop = 1;
  }
  if (uv_mutex_init(&ctx->post_lock)) {
    rc = RMX_ENOMEM;
    goto err_loop;
  }
  if (uv_async_init(ctx->loop, &ctx->async, async_cb)) {
    rc = RMX_ENOMEM;
    goto err_mutex;
  }
  ctx->async.data = ctx;
  /* The async handle only wakes the loop; it must not keep it alive. */
  uv_unref((uv_handle_t *)&ctx->async);
  uv_idle_init(ctx->loop, &ctx->idle);
  ctx->idle.data = ctx;
  rmx__flush_ctx_init(ctx);
  rmx__rpc_ctx_init(ctx);
  uv_timer_init(ctx->loop, &ctx->close_timer);
  ctx->close_timer.data = ctx;
  uv_unref((uv_handle_t *)&ctx->close_timer);
  rmx_list_init(&ctx->closing);
  rmx__auth_ctx_timer(ctx);
  rmx__alive_ctx_init(ctx);
  rmx__reconnect_ctx_init(ctx);
  ctx->handles = 11;

  rmx_list_init(&ctx->deferred);
  rmx_list_init(&ctx->posted);
  rmx_list_init(&ctx->conns);
  rmx_list_init(&ctx->listeners);
  rmx_list_init(&ctx->free_ops);
  rmx_list_init(&ctx->free_rma);
  rmx__pool_init(&ctx->pool);
  if ((rc = rmx__regcache_init(ctx)) != 0)
    goto err_handles;
  for (int i = 0; i < RMX_TP_COUNT; i++)
    ctx->tp_ops[i] = rmx__tp_ops(i); /* NULL where not built */
  /* The layers above the connection and the message layer plug in here. */
  ctx->up = (rmx__upcalls_t){
    .msg_fail = rmx__msg_fail_all, .rpc_fail = rmx__rpc_fail_all, .auth_end = rmx__auth_end,
    .rpc_drop = rmx__rpc_drop_unanswered, .conn_freed = conn_freed,
    .conn_retry = rmx__reconnect_lost,
    .rma_progress = rmx__rma_progress, .reads_resume = rmx__msg_reads_resume,
    .rpc_deliver = rmx__rpc_deliver,
  };
  ctx->opc[RMX_OP_EAGER] = ctx->opc[RMX_OP_RNDV] = &rmx__send_class;
  ctx->opc[RMX_OP_CTRL] = &rmx__ctrl_class;
  ctx->opc[RMX_OP_RX] = &rmx__rx_class;
  ctx->opc[RMX_OP_RMA] = ctx->opc[RMX_OP_RMA_IMM] = &rmx__rma_class;
  ctx->tp_env = (rmx_tp_env_t){.loop = ctx->loop, .cfg = &ctx->cfg,
                               .log_level = ctx->cfg.log_level, .log = rmx__log,
                               .event = rmx__tp_event, .incoming = rmx__tp_incoming};
  *out = ctx;
  return 0;

err_handles:
  uv_close((uv_handle_t *)&ctx->async, NULL);
  uv_close((uv_handle_t *)&ctx->idle, NULL);
  uv_close((uv_handle_t *)&ctx->flush_idle, NULL);
  uv_close((uv_handle_t *)&ctx->flush_prepare, NULL);
  uv_close((uv_handle_t *)&ctx->flush_check, NULL);
  uv_close((uv_handle_t *)&ctx->spin_idle, NULL);
  uv_close((uv_handle_t *)&ctx->rpc_timer, NULL);
  uv_close((uv_handle_t *)&ctx->close_timer, NULL);
  uv_close((uv_handle_t *)&ctx->auth_timer, NULL);
  uv_close((uv_handle_t *)&ctx->alive_timer, NULL);
  uv_close((uv_handle_t *)&ctx->recon_timer, NULL);
  uv_run(ctx->loop, UV_RUN_NOWAIT);
err_mutex:
  uv_mutex_destroy(&ctx->post_lock);
err_loop:
  if (ctx->owns_loop)
    uv_loop_close(&ctx->own_loop);
err_free:
  rmx__auth_ctx_fini(ctx);
  free(ctx);
  return rc;
}

static void ctx_finish_owned(rmx_ctx_t *ctx);

int rmx_ctx_run(rmx_ctx_t *ctx)
{
  if (!ctx || !ctx->owns_loop || ctx->running)
    return RMX_EINVAL;
  ctx->running = 1;
  uv_run(ctx->loop, UV_RUN_DEFAULT);
  ctx->running = 0;
  if (ctx->dying) /* rmx_ctx_destroy was called from a callback */
    ctx_finish_owned(ctx);
  return 0;
}

void rmx_ctx_stop(rmx_ctx_t *ctx) { uv_stop(ctx->loop); }

int rmx_ctx_fd(rmx_ctx_t *ctx)
{
  return ctx && ctx->owns_loop ? uv_backend_fd(ctx->loop) : RMX_EINVAL;
}

int rmx_ctx_timeout(rmx_ctx_t *ctx)
{
  return ctx && ctx->owns_loop ? uv_backend_timeout(ctx->loop) : RMX_EINVAL;
}

int rmx_ctx_progress(rmx_ctx_t *ctx)
{
  if (!ctx || !ctx->owns_loop || ctx->running || ctx->in_cb)
    return RMX_EINVAL;
  ctx->running = 1; /* a destroy from a callback leaves the finish to us */
  /* uv_run does not even look at a loop with nothing that keeps it alive,
   * and the wake-up of rmx_ctx_post is deliberately such a handle: hold it
   * for this non-blocking turn, so posts run too. */
  uv_ref((uv_handle_t *)&ctx->async);
  uv_run(ctx->loop, UV_RUN_NOWAIT);
  uv_unref((uv_handle_t *)&ctx->async);
  ctx->running = 0;
  if (!ctx->dying)
    return 0;
  ctx_finish_owned(ctx);
  return 1;
}

struct uv_loop_s *rmx_ctx_loop(rmx_ctx_t *ctx) { return ctx->loop; }

static void ctx_free(rmx_ctx_t *ctx)
{
  rmx_list_t *n;
  rmx__rpc_ctx_fini(ctx);
  while ((n = rmx_list_pop(&ctx->free_ops)) != NULL)
    free(rmx_container_of(n, rmx__op_t, link));
  while ((n = rmx_list_pop(&ctx->free_rma)) != NULL)
    free(rmx_container_of(n, rmx__rma_t, link));
  while ((n = rmx_list_pop(&ctx->posted)) != NULL)
    free(rmx_container_of(n, rmx__post_t, link));
  uv_mutex_destroy(&ctx->post_lock);
  rmx__auth_ctx_fini(ctx);
  if (ctx->owns_loop) {
    int rc = uv_loop_close(&ctx->own_loop);
    if (rc)
      RMX_LOG(ctx, WARN, "loop still had handles at destroy: %s", uv_strerror(rc));
  }
  free(ctx);
}

static void handle_closed(uv_handle_t *h)
{
  rmx_ctx_t *ctx = h->data;
  if (--ctx->handles == 0 && !ctx->owns_loop)
    ctx_free(ctx);
}

/* Every connection is gone: release what they used, close the handles.
 * The context is freed when the last handle has closed (caller's loop) or
 * right after (private loop). */
static void ctx_teardown(rmx_ctx_t *ctx)
{
  ctx->torn_down = 1;
  /* Registrations go before the transports that made them. */
  rmx__regcache_fini(ctx);
  rmx__pool_fini(ctx, &ctx->pool);
  for (int i = 0; i < RMX_TP_COUNT; i++)
    if (ctx->tp[i])
      ctx->tp_ops[i]->fini(ctx->tp[i]);
  uv_mutex_lock(&ctx->post_lock);
  ctx->destroying = 1;
  uv_mutex_unlock(&ctx->post_lock);
  async_cb(&ctx->async); /* posts that raced in still run once */
  uv_close((uv_handle_t *)&ctx->async, handle_closed);
  uv_close((uv_handle_t *)&ctx->idle, handle_closed);
  uv_close((uv_handle_t *)&ctx->flush_idle, handle_closed);
  uv_close((uv_handle_t *)&ctx->flush_prepare, handle_closed);
  uv_close((uv_handle_t *)&ctx->flush_check, handle_closed);
  uv_close((uv_handle_t *)&ctx->spin_idle, handle_closed);
  uv_close((uv_handle_t *)&ctx->rpc_timer, handle_closed);
  uv_close((uv_handle_t *)&ctx->close_timer, handle_closed);
  uv_close((uv_handle_t *)&ctx->auth_timer, handle_closed);
  uv_close((uv_handle_t *)&ctx->alive_timer, handle_closed);
  uv_close((uv_handle_t *)&ctx->recon_timer, handle_closed);
}

/* A connection was freed while the context is dying (an upcall of conn.c). */
static void conn_freed(rmx_ctx_t *ctx)
{
  if (rmx_list_empty(&ctx->conns) && !ctx->owns_loop && !ctx->torn_down)
    ctx_teardown(ctx);
}

/* The private loop is not running: run it until everything has closed
 * (bounded by the close timeout), then free. */
static void ctx_finish_owned(rmx_ctx_t *ctx)
{
  while (!rmx_list_empty(&ctx->conns))
    if (uv_run(ctx->loop, UV_RUN_ONCE) == 0 && !rmx_list_empty(&ctx->conns) &&
        rmx_list_empty(&ctx->deferred)) {
      /* Nothing left that could finish them: a defect, not a reason to spin. */
      RMX_LOG(ctx, ERROR, "destroy: connections left with nothing to finish them");
      break;
    }
  ctx_teardown(ctx);
  uv_run(ctx->loop, UV_RUN_DEFAULT);
  ctx_free(ctx);
}

int rmx_ctx_destroy(rmx_ctx_t *ctx)
{
  rmx_list_t *n;
  if (!ctx)
    return RMX_EINVAL;
  if (ctx->dying)
    return RMX_EALREADY;
  if (!rmx_list_empty(&ctx->listeners) || ctx->nmems)
    return RMX_EBUSY;
  if (ctx->owns_loop && !ctx->running && ctx->in_cb) {
    /* The application runs the private loop itself and calls from inside
     * it: finishing would run that loop again, and freeing it would pull it
     * from under the caller. */
    RMX_LOG(ctx, ERROR, "rmx_ctx_destroy from a callback needs rmx_ctx_run (or the "
            "caller's own loop): call it after uv_run returns");
    return RMX_EBUSY;
  }
  rmx_list_foreach(n, &ctx->conns) {
    if (!rmx_container_of(n, rmx_conn_t, link)->user_closed)
      return RMX_EBUSY;
  }
  ctx->dying = 1;
  /* Handshakes still in flight have no owner but the core: end them. Closes
   * in flight finish on the loop, each within the close timeout; finished
   * connections that only wait for unanswered requests go now. */
  rmx_list_foreach(n, &ctx->conns) {
    rmx_conn_t *c = rmx_container_of(n, rmx_conn_t, link);
    if (c->state == RMX_CS_ACCEPTING || (c->state == RMX_CS_AUTH && c->passive))
      rmx__conn_down(c, RMX_ECANCELED);
    else if (c->finished && !c->freeing)
      rmx__defer_once(ctx, &c->defer_free);
  }
  if (!ctx->owns_loop) {
    /* Never run the caller's loop: the rest happens as it runs. */
    if (rmx_list_empty(&ctx->conns))
      ctx_teardown(ctx);
  } else if (ctx->running) {
    uv_stop(ctx->loop); /* rmx_ctx_run finishes the job and returns */
  } else {
    ctx_finish_owned(ctx);
  }
  return 0;
}
