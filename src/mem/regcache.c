/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The registration cache: transfers from the same memory reuse one
 * registration instead of registering every time.
 *
 * A registration pins physical pages. If the application unmaps memory and
 * maps new memory at the same address, a cached registration would still
 * point at the old pages and data would silently go astray. So the cache
 * is armed the first time a context keeps a registration (a verbs
 * transfer from memory the application did not register), never before:
 * - munmap, mremap and madvise(DONTNEED/FREE/REMOVE) are hooked
 *   (memhooks.c): every cache drops the registrations that overlap an
 *   unmapped range before its next lookup;
 * - glibc's malloc unmaps through internal calls that no hook sees, so
 *   from then on malloc is asked never to map a block on its own nor to
 *   give its heap back (mallopt M_MMAP_MAX=0, M_TRIM_THRESHOLD=-1): freed
 *   memory is reused as the same pages, which keeps registrations right;
 * - blocks malloc had mapped before that moment are still unmapped by
 *   free behind the hooks: the anonymous mappings that exist when the
 *   cache is armed are noted, and a registration overlapping one is used
 *   for its transfer and never kept, until the hooks see a fresh mapping
 *   made over that range (mmap, mremap: nothing older is left there, and
 *   its unmapping will be seen);
 * - such a fresh mapping also drops the registrations cached over it,
 *   as an unmap does: that memory was unmapped, whether a hook saw it or
 *   not;
 * - fork takes and lets go of the locks the hooks take (atfork handlers).
 * docs/architecture.md ("Memory") lists what stays uncovered.
 * A process that never keeps a registration (no context, TCP only, the
 * cache off) runs with glibc's malloc exactly as configured by default.
 * RMX_REGCACHE=0 turns the cache off: every transfer registers and
 * deregisters, malloc is left alone and nothing is hooked. Built with
 * RMX_MEMHOOKS off (cmake -DRMX_MEMHOOKS=OFF), librmx has no hook, sets
 * nothing in malloc, and has no cache. docs/architecture.md ("Memory")
 * weighs the choices; see also docs/one-sided.md.
 */
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mem/memhooks.h"
#include "rmx_int.h"

#define PENDING_MAX 64
#define PAGE 4096u

struct rmx__rc_pending {
  atomic_int dirty;
  int overflow;
  int n;
  uintptr_t start[PENDING_MAX], end[PENDING_MAX];
};

/* Every cache in the process, for the unmap hooks (never on the data path). */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static rmx_list_t g_caches = {&g_caches, &g_caches};
static atomic_int g_ncaches;

static void note_unmap(const void *addr, size_t len)
{
  if (atomic_load_explicit(&g_ncaches, memory_order_acquire) == 0 || len == 0)
    return;
  uintptr_t s = (uintptr_t)addr, e = s + len;
  rmx_list_t *n;
  pthread_mutex_lock(&g_lock);
  rmx_list_foreach(n, &g_caches) {
    struct rmx__rc_pending *p = rmx_container_of(n, rmx__regcache_t, global_link)->pending;
    if (p->n < PENDING_MAX) {
      p->start[p->n] = s;
      p->end[p->n] = e;
      p->n++;
    } else {
      p->overflow = 1; /* too many to keep: that cache drops everything */
    }
    atomic_store_explicit(&p->dirty, 1, memory_order_release);
  }
  pthread_mutex_unlock(&g_lock);
}

/* ---- the cache ---- */

static void entry_free(rmx_ctx_t *ctx, rmx__rc_entry_t *e)
{
  ctx->tp_ops[e->tpi]->mem_dereg(e->mem);
  ctx->rc.bytes -= e->end - e->start;
  free(e);
}

static void entry_drop(rmx_ctx_t *ctx, rmx__rc_entry_t *e)
{
  rmx_list_del(&e->link);
  ctx->rc.entries--;
  ctx->st.reg_cache_evictions++;
  if (e->refs == 0)
    entry_free(ctx, e);
  else
    e->dead = 1; /* in use: goes when released */
}

static void invalidate(rmx_ctx_t *ctx, uintptr_t s, uintptr_t e, int all)
{
  rmx_list_t *n, *next;
  for (n = ctx->rc.lru.next; n != &ctx->rc.lru; n = next) {
    next = n->next;
    rmx__rc_entry_t *en = rmx_container_of(n, rmx__rc_entry_t, link);
    if (all || (en->start < e && s < en->end))
      entry_drop(ctx, en);
  }
}

/* Apply what other threads' unmaps left for this cache. */
static void apply_pending(rmx_ctx_t *ctx)
{
  struct rmx__rc_pending *p = ctx->rc.pending;
  uintptr_t s[PENDING_MAX], e[PENDING_MAX];
  int n, all;
  if (!atomic_load_explicit(&p->dirty, memory_order_acquire))
    return;
  pthread_mutex_lock(&g_lock);
  n = p->n;
  all = p->overflow;
  memcpy(s, p->start, sizeof(s[0]) * (size_t)n);
  memcpy(e, p->end, sizeof(e[0]) * (size_t)n);
  p->n = 0;
  p->overflow = 0;
  atomic_store_explicit(&p->dirty, 0, memory_order_relaxed);
  pthread_mutex_unlock(&g_lock);
  if (all)
    invalidate(ctx, 0, 0, 1);
  for (int i = 0; i < n && !all; i++)
    invalidate(ctx, s[i], e[i], 0);
}

int rmx__regcache_init(rmx_ctx_t *ctx)
{
  rmx_list_init(&ctx->rc.lru);
  rmx_list_init(&ctx->rc.global_link);
  ctx->rc.max_bytes = (size_t)1 << 30;
  ctx->rc.max_entries = 256;
  /* Without the hooks, a cached registration could outlive its pages. */
  ctx->rc.enabled = RMX_MEMHOOKS && ctx->cfg.regcache;
  ctx->rc.pending = calloc(1, sizeof(*ctx->rc.pending));
  if (!ctx->rc.pending)
    return RMX_ENOMEM;
  if (ctx->rc.enabled) {
    pthread_mutex_lock(&g_lock);
    rmx_list_push(&g_caches, &ctx->rc.global_link);
    atomic_fetch_add(&g_ncaches, 1);
    pthread_mutex_unlock(&g_lock);
    ctx->rc.registered = 1;
  }
  return 0;
}

void rmx__regcache_fini(rmx_ctx_t *ctx)
{
  if (ctx->rc.registered) {
    pthread_mutex_lock(&g_lock);
    rmx_list_del(&ctx->rc.global_link);
    atomic_fetch_sub(&g_ncaches, 1);
    pthread_mutex_unlock(&g_lock);
    ctx->rc.registered = 0;
  }
  invalidate(ctx, 0, 0, 1);
  free(ctx->rc.pending);
  ctx->rc.pending = NULL;
}

/* ---- arming: malloc settings and the mappings that predate them ---- */

/*
 * The anonymous mappings that existed when the cache was armed and have
 * not been seen replaced since: [start, end) pairs in address order,
 * which only shrink (read on every lookup, changed by the mmap hook,
 * which must not allocate: a split that finds no room leaves the range
 * whole, which is only slower).
 */
static pthread_once_t g_arm_once = PTHREAD_ONCE_INIT;
static pthread_rwlock_t g_pre_lock = PTHREAD_RWLOCK_INITIALIZER;
static uintptr_t *g_pre;         /* never freed: the process's lifetime */
static size_t g_npre, g_pre_cap; /* pairs */
static int g_pre_unknown;        /* /proc/self/maps unreadable: keep nothing */

/*
 * The anonymous mappings that exist now: those malloc made itself (its
 * large blocks, other threads' arenas) are among them, and free unmaps
 * them behind the hooks. The program break's heap is not: it never shrinks
 * once the cache is armed. Others (stacks, the application's own mmaps)
 * are kept out too: nothing here tells them apart, and leaving a range
 * uncached is only slower. *out is [start, end) pairs in address order
 * with room for as many again (the splits to come); returns 1 where
 * /proc/self/maps could not be read whole (keep nothing then).
 * Read without the locks: stdio allocates, and an allocator that maps
 * through the hooks would then wait on them.
 */
static int read_maps(uintptr_t **out, size_t *np, size_t *capp)
{
  FILE *f = fopen("/proc/self/maps", "re");
  uintptr_t *pre = NULL;
  size_t n = 0, cap = 0;
  int unknown = !f;
  char line[512];
  while (f && fgets(line, sizeof(line), f)) {
    unsigned long s, e, ino;
    char perms[8], path[256] = "";
    int k = sscanf(line, "%lx-%lx %7s %*s %*s %lu %255s", &s, &e, perms, &ino, path);
    if (k < 4 || ino != 0)
      continue; /* a file's */
    if (k == 5 && strcmp(path, "[stack]") != 0 && strncmp(path, "[anon", 5) != 0)
      continue; /* [heap] (the program break's, which no longer shrinks), [vdso]... */
    if (n == cap) {
      size_t ncap = cap ? 2 * cap : 128;
      uintptr_t *np2 = realloc(pre, 2 * ncap * sizeof(*np2));
      if (!np2) {
        unknown = 1;
        break;
      }
      pre = np2;
      cap = ncap;
    }
    pre[2 * n] = s; /* the kernel lists mappings in address order */
    pre[2 * n + 1] = e;
    n++;
  }
  if (f)
    fclose(f);
  *out = pre;
  *np = n;
  *capp = cap;
  return unknown;
}

/*
 * The union of two lists of ranges in address order, into out (room for
 * na + nb pairs): overlapping or touching ranges become one. Returns the
 * number of pairs.
 */
static size_t ranges_union(const uintptr_t *a, size_t na, const uintptr_t *b, size_t nb,
                           uintptr_t *out)
{
  size_t i = 0, j = 0, n = 0;
  while (i < na || j < nb) {
    const uintptr_t *r = (j == nb || (i < na && a[2 * i] <= b[2 * j])) ? &a[2 * i++] : &b[2 * j++];
    if (n > 0 && r[0] <= out[2 * n - 1]) {
      if (r[1] > out[2 * n - 1])
        out[2 * n - 1] = r[1];
    } else {
      out[2 * n] = r[0];
      out[2 * n + 1] = r[1];
      n++;
    }
  }
  return n;
}

/* The first reading, before the mmap hook reports to note_mapped. */
static void note_premapped(void)
{
  uintptr_t *pre;
  size_t n, cap;
  int unknown = read_maps(&pre, &n, &cap);
  pthread_rwlock_wrlock(&g_pre_lock);
  g_pre = pre;
  g_npre = n;
  g_pre_cap = cap;
  g_pre_unknown = unknown;
  pthread_rwlock_unlock(&g_pre_lock);
}

/*
 * The second reading, once the mmap hook reports: anything mapped by a
 * malloc that was already past its settings when the first was taken is
 * in it, and joins the list (what note_mapped removed in between and is
 * listed again only stays uncached).
 */
static void note_premapped_again(void)
{
  uintptr_t *b, *u = NULL, *old;
  size_t nb, capb, cap;
  int unknown = read_maps(&b, &nb, &capb);
  pthread_rwlock_rdlock(&g_pre_lock);
  cap = g_pre_cap + capb; /* g_pre_cap is set once, by note_premapped */
  pthread_rwlock_unlock(&g_pre_lock);
  if (!unknown && cap > 0) {
    u = malloc(2 * cap * sizeof(*u));
    unknown = !u;
  }
  pthread_rwlock_wrlock(&g_pre_lock);
  old = g_pre;
  if (u) {
    g_npre = ranges_union(g_pre, g_npre, b, nb, u);
    g_pre = u;
    g_pre_cap = cap;
  }
  g_pre_unknown |= unknown;
  pthread_rwlock_unlock(&g_pre_lock);
  free(u ? old : NULL);
  free(b);
}

/* The first range that ends after s (caller holds g_pre_lock). */
static size_t pre_find(uintptr_t s)
{
  size_t lo = 0, hi = g_npre;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (g_pre[2 * mid + 1] <= s)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/*
 * The hooks saw a fresh mapping at [addr, addr + len): whatever was there
 * before is gone, and this memory's unmapping will be seen. Later
 * registrations of it may be cached; those cached before are stale (the
 * range was unmapped where no hook saw it: dlclose inside ld.so, a raw
 * syscall, glibc's internals) and go as for an unmap.
 */
static void note_mapped(const void *addr, size_t len)
{
  uintptr_t a = (uintptr_t)addr, b = a + len;
  pthread_rwlock_wrlock(&g_pre_lock);
  for (size_t i = pre_find(a); i < g_npre && g_pre[2 * i] < b;) {
    uintptr_t *r = &g_pre[2 * i];
    if (r[0] < a && r[1] > b) { /* the middle goes: split, where there is room */
      if (g_npre < g_pre_cap) {
        memmove(r + 2, r, (g_npre - i) * 2 * sizeof(*r));
        r[1] = a;
        r[2] = b;
        g_npre++;
      }
      break;
    }
    if (r[0] < a) {
      r[1] = a;
      i++;
    } else if (r[1] > b) {
      r[0] = b;
      break;
    } else { /* all of it */
      memmove(r, r + 2, (g_npre - i - 1) * 2 * sizeof(*r));
      g_npre--;
    }
  }
  pthread_rwlock_unlock(&g_pre_lock);
  note_unmap(addr, len); /* after: the two locks are never held together */
}

/*
 * fork: a child has only the thread that forked, and a lock another
 * thread held stays held there for good. So every lock the hooks take is
 * taken before fork and let go on both sides (started afresh in the child), always in this order (no
 * code path holds two of them at once, and none maps, unmaps or allocates
 * while holding one).
 */
static void fork_prepare(void)
{
  rmx__memhooks_hold();
  pthread_rwlock_wrlock(&g_pre_lock);
  pthread_mutex_lock(&g_lock);
}

static void fork_parent(void)
{
  pthread_mutex_unlock(&g_lock);
  pthread_rwlock_unlock(&g_pre_lock);
  rmx__memhooks_release();
}

/* The child's thread has a thread id of its own, and glibc's rwlock tells
 * a writer's unlock by the id that took it: the child starts the locks
 * afresh instead (it is alone, and what they guard is whole). */
static void fork_child(void)
{
  pthread_mutex_init(&g_lock, NULL);
  pthread_rwlock_init(&g_pre_lock, NULL);
  rmx__memhooks_release_child();
}

/*
 * Arming. A thread already inside malloc, past its check of M_MMAP_MAX,
 * may map a block after the settings: glibc maps a block with its arena's
 * lock held, and mallinfo2 takes every arena's lock in turn, so once it
 * returns, every such mapping exists and later ones obey the settings.
 * The maps are read after that, and once more after the mmap hook reports
 * (covering a mapping made by malloc outside any arena lock, when it
 * could not get an arena, if it came before that second reading).
 */
static void arm_once(void)
{
#if RMX_MEMHOOKS /* else no cache is ever enabled, and librmx leaves malloc alone */
  pthread_atfork(fork_prepare, fork_parent, fork_child);
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, -1);
  (void)mallinfo2(); /* every arena's lock, in turn */
  note_premapped();
  rmx__memhooks_on_map(note_mapped);
  note_premapped_again();
#else
  (void)note_premapped;
  (void)note_premapped_again;
  (void)note_mapped;
  (void)fork_prepare;
  (void)fork_parent;
  (void)fork_child;
#endif
}

/* [s, e) overlaps a mapping that predates the cache (or none is known). */
static int premapped(uintptr_t s, uintptr_t e)
{
  pthread_rwlock_rdlock(&g_pre_lock);
  size_t i = pre_find(s);
  int r = g_pre_unknown || (i < g_npre && g_pre[2 * i] < e);
  pthread_rwlock_unlock(&g_pre_lock);
  return r;
}

/*
 * The hooks are in place and have seen every object loaded so far, and
 * malloc is set for the cache (the first call arms both): 0. Objects
 * loaded since the last lookup may have unmapped cached memory unseen, so
 * the cache starts over then. Without the hooks the cache turns itself off
 * for good.
 */
static int hooks_ready(rmx_ctx_t *ctx)
{
  rmx__regcache_t *rc = &ctx->rc;
  int r = rmx__memhooks_install(note_unmap);
  if (r == 0) {
    pthread_once(&g_arm_once, arm_once);
    unsigned long gen = rmx__memhooks_sync();
    if (gen != rc->hooks_gen) {
      rc->hooks_gen = gen;
      invalidate(ctx, 0, 0, 1);
    }
    if (rmx__memhooks_failed())
      r = RMX_EIO;
  }
  if (r) {
    RMX_LOG(ctx, WARN, "registration cache off: munmap could not be hooked everywhere (%s); "
            "every transfer registers its memory", rmx_strerror(r));
    invalidate(ctx, 0, 0, 1);
    rc->enabled = 0;
  }
  return r;
}

int rmx__regcache_get(rmx_ctx_t *ctx, int tpi, const void *addr, size_t len, unsigned access,
                      rmx__rc_entry_t **out)
{
  rmx__regcache_t *rc = &ctx->rc;
  uintptr_t s = (uintptr_t)addr & ~(uintptr_t)(PAGE - 1);
  uintptr_t e = ((uintptr_t)addr + len + PAGE - 1) & ~(uintptr_t)(PAGE - 1);
  rmx_list_t *n;
  int keep = 0;

  if (rc->enabled && hooks_ready(ctx) == 0 && (keep = !premapped(s, e)) != 0) {
    apply_pending(ctx);
    rmx_list_foreach(n, &rc->lru) {
      rmx__rc_entry_t *en = rmx_container_of(n, rmx__rc_entry_t, link);
      if (en->tpi == tpi && en->start <= s && e <= en->end && (en->access & access) == access) {
        rmx_list_del(n);
        rmx_list_push_front(&rc->lru, n);
        en->refs++;
        ctx->st.reg_cache_hits++;
        *out = en;
        return 0;
      }
    }
  }
  rmx__rc_entry_t *en = calloc(1, sizeof(*en));
  if (!en)
    return RMX_ENOMEM;
  int r = ctx->tp_ops[tpi]->mem_reg(ctx->tp[tpi], (void *)s, e - s, access, NULL, &en->mem);
  if (r) {
    free(en);
    return r;
  }
  ctx->st.reg_cache_misses++;
  en->start = s;
  en->end = e;
  en->tpi = tpi;
  en->access = access;
  en->refs = 1;
  rc->bytes += e - s;
  rmx_list_init(&en->link);
  if (keep) {
    rmx_list_push_front(&rc->lru, &en->link);
    rc->entries++;
  } else {
    en->dead = 1; /* not kept: released after this transfer */
  }
  *out = en;
  /* Over a limit: drop the least recently used ones nobody holds. */
  rmx_list_t *prev;
  for (n = rc->lru.prev;
       (rc->bytes > rc->max_bytes || rc->entries > rc->max_entries) && n != &rc->lru; n = prev) {
    prev = n->prev;
    rmx__rc_entry_t *old = rmx_container_of(n, rmx__rc_entry_t, link);
    if (old->refs == 0)
      entry_drop(ctx, old);
  }
  return 0;
}

void rmx__regcache_put(rmx_ctx_t *ctx, rmx__rc_entry_t *e)
{
  if (--e->refs == 0 && e->dead)
    entry_free(ctx, e);
}
