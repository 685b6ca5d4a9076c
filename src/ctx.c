/* SPDX-License-Identifier: BSD-3-Clause */
/* Context: configuration, the loop, deferred work, cross-thread posts. */
#include <inttypes.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>

#include "config.h"
#include "conn/choose.h"
#include "names.h"
#include "rails.h"
#include "rmx_int.h"

typedef struct rmx__post {
  rmx_list_t link;
  rmx_post_fn fn;
  void *arg;
} rmx__post_t;

/* ---- cross-thread posts ---- */

static void async_cb(uv_async_t *h)
{
  rmx_ctx_t *ctx = h->data;
  rmx_list_t batch;
  rmx__cb_enter(ctx);
  rmx_list_init(&batch);
  uv_mutex_lock(&ctx->post_lock);
  rmx_list_splice(&batch, &ctx->posted);
  uv_mutex_unlock(&ctx->post_lock);
  rmx_list_t *n;
  while ((n = rmx_list_pop(&batch)) != NULL) {
    rmx__post_t *p = rmx_container_of(n, rmx__post_t, link);
    ctx->ran++;
    p->fn(p->arg);
    free(p);
  }
  ctx->in_cb--;
}

/*
 * Any thread may post, up to its first RMX_ECANCELED. Refusal starts with
 * rmx_ctx_destroy (destroying, under post_lock), so every post accepted
 * before then is on the list the teardown drains. A poster may still be
 * inside this function when the context is freed: posters counts them, and
 * ctx_free waits for none before it destroys the lock and frees.
 */
int rmx_ctx_post(rmx_ctx_t *ctx, rmx_post_fn fn, void *arg)
{
  if (!ctx || !fn)
    return RMX_EINVAL;
  rmx__post_t *p = malloc(sizeof(*p));
  if (!p)
    return RMX_ENOMEM;
  p->fn = fn;
  p->arg = arg;
  int rc = 0;
  atomic_fetch_add(&ctx->posters, 1);
  uv_mutex_lock(&ctx->post_lock);
  if (ctx->destroying) {
    rc = RMX_ECANCELED;
  } else {
    rmx_list_push(&ctx->posted, &p->link);
    atomic_store_explicit(&ctx->post_due, 1, memory_order_relaxed);
    uv_async_send(&ctx->async);
    p = NULL;
  }
  uv_mutex_unlock(&ctx->post_lock);
  atomic_fetch_sub(&ctx->posters, 1); /* ctx is not touched after this */
  free(p);
  return rc;
}

/* Posts are queued that no loop turn has run yet. */
static int posts_queued(rmx_ctx_t *ctx)
{
  uv_mutex_lock(&ctx->post_lock);
  int queued = !rmx_list_empty(&ctx->posted);
  uv_mutex_unlock(&ctx->post_lock);
  return queued;
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

/* Every TCP connection holds a socket: the first context of the process
 * raises the soft descriptor limit to the hard one (docs/tuning.md). A
 * process that lowered it again later keeps its own choice. */
static void nofile_raise(rmx_ctx_t *ctx)
{
  static atomic_flag done = ATOMIC_FLAG_INIT;
  struct rlimit rl;
  if (atomic_flag_test_and_set(&done) || getrlimit(RLIMIT_NOFILE, &rl) != 0 ||
      rl.rlim_cur >= rl.rlim_max)
    return;
  rlim_t was = rl.rlim_cur;
  rl.rlim_cur = rl.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
    RMX_LOG(ctx, WARN, "cannot raise the descriptor limit (RLIMIT_NOFILE) from %llu to %llu",
            (unsigned long long)was, (unsigned long long)rl.rlim_max);
  else
    RMX_LOG(ctx, INFO, "raised the descriptor limit (RLIMIT_NOFILE) from %llu to its hard limit %llu",
            (unsigned long long)was, (unsigned long long)rl.rlim_max);
}

static void conn_freed(rmx_ctx_t *ctx);
/* A connection is being freed: the layers that point at it let go. */
static void conn_gone(rmx_conn_t *c)
{
  rmx__xfer_conn_gone(c);
  rmx__names_conn_gone(c);
  rmx__rails_conn_gone(c);
}

int rmx_ctx_create(rmx_ctx_t **out, struct uv_loop_s *loop, const rmx_config_t *cfg)
{
  rmx_ctx_t *ctx;
  int rc;

  if (!out)
    return RMX_EINVAL;
  ctx = calloc(1, sizeof(*ctx));
  if (!ctx)
    return RMX_ENOMEM;
  if ((rc = cfg ? rmx__config_take(&ctx->cfg, cfg) : rmx_config_init(&ctx->cfg)) != 0)
    goto err_free;
  if ((rc = rmx__config_check(&ctx->cfg)) != 0 || (rc = rmx__auth_ctx_init(ctx)) != 0)
    goto err_free;
  sigpipe_ignore();
  nofile_raise(ctx);

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
  if ((rc = rmx__names_ctx_init(ctx)) != 0 || (rc = rmx__rails_ctx_init(ctx)) != 0 ||
      (rc = rmx__regcache_init(ctx)) != 0)
    goto err_handles;
  for (int i = 0; i < RMX_TP_COUNT; i++)
    ctx->tp_ops[i] = rmx__tp_ops(i); /* NULL where not built */
  /* The layers above the connection and the message layer plug in here. */
  ctx->up = (rmx__upcalls_t){
    .msg_fail = rmx__msg_fail_all, .rpc_fail = rmx__rpc_fail_all, .auth_end = rmx__auth_end,
    .rpc_drop = rmx__rpc_drop_unanswered, .conn_freed = conn_freed,
    .conn_retry = rmx__reconnect_lost,
    .conn_fallback = rmx__conn_fallback,
    .rma_progress = rmx__rma_progress, .reads_resume = rmx__msg_reads_resume,
    .rpc_deliver = rmx__rpc_deliver, .rpc_due = rmx__rpc_due,
    .notify_deliver = rmx__notify_deliver, .conn_gone = conn_gone,
    .name_forget = rmx__names_forget, .rail_offered = rmx__rail_offered,
    .rail_attach = rmx__rail_attach, .rails_down = rmx__rails_down,
  };
  ctx->opc[RMX_OP_EAGER] = ctx->opc[RMX_OP_RNDV] = &rmx__send_class;
  ctx->opc[RMX_OP_CTRL] = &rmx__ctrl_class;
  ctx->opc[RMX_OP_RX] = &rmx__rx_class;
  ctx->opc[RMX_OP_RMA] = ctx->opc[RMX_OP_RMA_IMM] = &rmx__rma_class;
  ctx->opc[RMX_OP_XFER] = &rmx__xfer_class;
  ctx->tp_env = (rmx_tp_env_t){.loop = ctx->loop, .cfg = &ctx->cfg,
                               .log_level = ctx->cfg.log_level, .log = rmx__log,
                               .event = rmx__tp_event, .recv = rmx__tp_recv,
                               .incoming = rmx__tp_incoming, .strike = rmx__tp_strike};
  *out = ctx;
  return 0;

err_handles:
  rmx__rpc_ctx_fini(ctx); /* handlers registered so far */
  rmx__names_ctx_fini(ctx);
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
  if (ctx->cfg.progress == RMX_PROGRESS_EVENT) {
    uv_run(ctx->loop, UV_RUN_DEFAULT);
  } else {
    rmx__progress_spin(ctx);
    /* A stop requested outside the loop's turn is still flagged in it. */
    if (!ctx->dying)
      uv_run(ctx->loop, UV_RUN_NOWAIT);
  }
  ctx->running = 0;
  if (ctx->dying) /* rmx_ctx_destroy was called from a callback */
    ctx_finish_owned(ctx);
  return 0;
}

void rmx_ctx_stop(rmx_ctx_t *ctx)
{
  ctx->stop = 1;
  uv_stop(ctx->loop);
}

int rmx_ctx_fd(rmx_ctx_t *ctx)
{
  return ctx && ctx->owns_loop ? uv_backend_fd(ctx->loop) : RMX_EINVAL;
}

/*
 * libuv says 0 (at once) for a loop that nothing referenced keeps alive,
 * which is every idle context: rmx's own handles are unreferenced. Asked
 * with the post wake-up referenced, as rmx_ctx_progress runs its turn, it
 * gives the real answer: 0 while work is pending (idle handles, closing
 * handles, fds not yet in the backend's set: a turn adds them), else the
 * next timer's deadline (unreferenced timers are still due), else -1. A
 * post sent while the caller sleeps makes the fd readable; posts already
 * queued must run now: 0.
 */
int rmx_ctx_timeout(rmx_ctx_t *ctx)
{
  if (!ctx || !ctx->owns_loop)
    return RMX_EINVAL;
  if (posts_queued(ctx))
    return 0;
  uv_handle_t *wake = (uv_handle_t *)&ctx->async;
  int had = uv_has_ref(wake);
  if (!had)
    uv_ref(wake);
  int ms = uv_backend_timeout(ctx->loop);
  if (!had)
    uv_unref(wake);
  return ms;
}

/* What a call handled: the completions and frames its pass found, or, if
 * more, the callbacks it ran (a deferred answer, a timer, the loop's turn). */
static int progress_count(const rmx_ctx_t *ctx, unsigned ran_before, int found)
{
  unsigned ran = ctx->ran - ran_before;
  if (ran > INT_MAX)
    ran = INT_MAX;
  return found > (int)ran ? found : (int)ran;
}

int rmx_ctx_progress(rmx_ctx_t *ctx)
{
  if (!ctx || ctx->in_cb || (ctx->owns_loop && ctx->running))
    return RMX_EINVAL;
  if (ctx->dying)
    return RMX_ECANCELED; /* the caller's loop: finishing there */
  unsigned ran_before = ctx->ran;
  if (!ctx->owns_loop) {
    /* Never the caller's loop: it turns it. */
    int n = rmx__progress_pass(ctx);
    return ctx->dying ? RMX_ECANCELED : progress_count(ctx, ran_before, n);
  }
  ctx->running = 1; /* a destroy from a callback leaves the finish to us */
  int n = rmx__progress_pass(ctx);
  /* Polling, the loop turns once every so many passes; in event and
   * adaptive progress the caller sleeps on the fd between calls, and every
   * call turns it (what woke the fd is the loop's). */
  if (!ctx->dying &&
      (ctx->cfg.progress != RMX_PROGRESS_POLL || rmx__progress_turn_due(ctx, n)))
    rmx__progress_turn(ctx);
  ctx->running = 0;
  if (!ctx->dying)
    return progress_count(ctx, ran_before, n);
  ctx_finish_owned(ctx);
  return RMX_ECANCELED;
}

/* A pass, then, when it found nothing and ran nothing, one turn that
 * sleeps in the loop's own poll until an event or timer (rmx_ctx_run's
 * wait, one call at a time): no second poll around the loop's. */
int rmx_ctx_wait(rmx_ctx_t *ctx)
{
  if (!ctx || ctx->in_cb || !ctx->owns_loop || ctx->running)
    return RMX_EINVAL;
  if (ctx->dying)
    return RMX_ECANCELED;
  unsigned ran_before = ctx->ran;
  ctx->running = 1;
  int n = rmx__progress_pass(ctx);
  if (!ctx->dying)
    rmx__progress_turn_mode(ctx, n == 0 && ctx->ran == ran_before ? UV_RUN_ONCE : UV_RUN_NOWAIT);
  ctx->running = 0;
  if (!ctx->dying)
    return progress_count(ctx, ran_before, n);
  ctx_finish_owned(ctx);
  return RMX_ECANCELED;
}

/* The send half of a pass alone: no transport is polled and the loop does
 * not turn, so a caller that just sent (and will sleep on the fd) spends
 * one write, not a read that finds nothing and a poll of the backend too. */
int rmx_ctx_flush(rmx_ctx_t *ctx)
{
  if (!ctx || ctx->in_cb || (ctx->owns_loop && ctx->running))
    return RMX_EINVAL;
  if (ctx->dying)
    return RMX_ECANCELED;
  ctx->running = ctx->owns_loop; /* an on_sent that destroys the context leaves the finish here */
  rmx__progress_flush(ctx);
  ctx->running = 0;
  if (!ctx->dying)
    return 0;
  if (ctx->owns_loop)
    ctx_finish_owned(ctx);
  return RMX_ECANCELED;
}

struct uv_loop_s *rmx_ctx_loop(rmx_ctx_t *ctx) { return ctx->loop; }

static void ctx_free(rmx_ctx_t *ctx)
{
  rmx_list_t *n;
  rmx__rpc_ctx_fini(ctx);
  rmx__names_ctx_fini(ctx);
  while ((n = rmx_list_pop(&ctx->free_ops)) != NULL)
    free(rmx_container_of(n, rmx__op_t, link));
  while ((n = rmx_list_pop(&ctx->free_rma)) != NULL)
    free(rmx_container_of(n, rmx__rma_t, link));
  while ((n = rmx_list_pop(&ctx->posted)) != NULL)
    free(rmx_container_of(n, rmx__post_t, link));
  /* Posts are refused since destroy began; one that came in before its
   * poster saw that may still hold the lock: let it leave first. */
  while (atomic_load(&ctx->posters) != 0)
    sched_yield();
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
  async_cb(&ctx->async); /* posts accepted before destroy still run once */
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
  /* A stop flagged outside the loop (a destroy from a callback of the fast
   * path) ends the first run after one iteration: run again until every
   * handle has closed. */
  while (uv_run(ctx->loop, UV_RUN_DEFAULT) != 0)
    ;
  ctx_free(ctx);
}

int rmx_ctx_destroy(rmx_ctx_t *ctx)
{
  rmx_list_t *n;
  if (!ctx)
    return RMX_EINVAL;
  if (ctx->dying)
    return RMX_EALREADY;
  if (!rmx_list_empty(&ctx->listeners) || ctx->nmems || ctx->nxfers || ctx->nmetas)
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
  /* From here rmx_ctx_post refuses; what it accepted runs by the teardown. */
  uv_mutex_lock(&ctx->post_lock);
  ctx->destroying = 1;
  uv_mutex_unlock(&ctx->post_lock);
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
