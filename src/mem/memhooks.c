/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The registration cache's unmap hooks (regcache.c says why it needs
 * them), installed the first time a cache keeps a registration, and not
 * before: a process whose contexts never cache memory (TCP only, or
 * RMX_REGCACHE=0) runs with its munmap untouched, and librmx exports no
 * libc function.
 *
 * Installing means rewriting, in every loaded object, the relocated
 * pointers through which its code calls munmap, mremap and madvise (PLT
 * slots and GOT entries: R_*_JUMP_SLOT, R_*_GLOB_DAT), so that the calls
 * go to the hooks here; each hook notes the range, then calls what the
 * symbol resolved to before (the C library's, or an interposer's such as a
 * sanitizer's). Objects loaded later are rewritten at the next cache
 * lookup (rmx__memhooks_sync), and every cache then drops what it holds,
 * since such an object may have unmapped cached memory in between.
 * (Hooking dlopen instead would change what it resolves: glibc reads the
 * caller's run path from the return address.) Calls the C library makes
 * inside itself (malloc's own unmapping) never go through a slot:
 * regcache.c covers malloc with mallopt instead. mmap (and mmap64) are
 * hooked too, to tell regcache.c which ranges a new mapping took
 * (rmx__memhooks_on_map): memory that was there before is gone, whoever
 * unmapped it.
 *
 * Written here rather than taken from a library: the only maintained
 * implementations live inside larger runtimes (UCX's ucm), and what rmx
 * needs is this one walk over the dynamic sections. x86-64 and AArch64.
 */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "mem/memhooks.h"
#include "rmx_int.h"

#if RMX_MEMHOOKS && (defined(__x86_64__) || defined(__aarch64__))

#if defined(__x86_64__)
#define R_SLOT R_X86_64_JUMP_SLOT
#define R_GOT R_X86_64_GLOB_DAT
#else
#define R_SLOT R_AARCH64_JUMP_SLOT
#define R_GOT R_AARCH64_GLOB_DAT
#endif

static void (*g_note)(const void *addr, size_t len);
static void (*_Atomic g_mapped)(const void *addr, size_t len);

/* What each symbol resolved to before the hooks. */
static int (*next_munmap)(void *, size_t);
static void *(*next_mremap)(void *, size_t, size_t, int, ...);
static int (*next_madvise)(void *, size_t, int);
static void *(*next_mmap)(void *, size_t, int, int, int, off_t);
static void *(*next_mmap64)(void *, size_t, int, int, int, off_t);

/* A new mapping, unless it replaced what was there (MAP_FIXED): that
 * memory's owner may still think it has it. */
static void *mapped(void *p, size_t len, int fixed)
{
  void (*f)(const void *, size_t) = g_mapped;
  if (p != MAP_FAILED && !fixed && f)
    f(p, len);
  return p;
}

static void *hook_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
  return mapped(next_mmap(addr, len, prot, flags, fd, off), len, flags & MAP_FIXED);
}

static void *hook_mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
  return mapped(next_mmap64(addr, len, prot, flags, fd, off), len, flags & MAP_FIXED);
}

static int hook_munmap(void *addr, size_t len)
{
  g_note(addr, len);
  return next_munmap(addr, len);
}

static void *hook_mremap(void *old, size_t old_len, size_t new_len, int flags, ...)
{
  void *new_addr = NULL;
  if (flags & MREMAP_FIXED) {
    va_list ap;
    va_start(ap, flags);
    new_addr = va_arg(ap, void *);
    va_end(ap);
  }
  g_note(old, old_len);
  return mapped(next_mremap(old, old_len, new_len, flags, new_addr), new_len,
                flags & MREMAP_FIXED);
}

static int hook_madvise(void *addr, size_t len, int advice)
{
  if (advice == MADV_DONTNEED || advice == MADV_FREE || advice == MADV_REMOVE)
    g_note(addr, len);
  return next_madvise(addr, len, advice);
}

static const struct {
  const char *name;
  void *hook;
  void **next;
  int optional; /* a C library without it has no caller of it either */
} hooks[] = {
  {"munmap", (void *)hook_munmap, (void **)&next_munmap, 0},
  {"mremap", (void *)hook_mremap, (void **)&next_mremap, 0},
  {"madvise", (void *)hook_madvise, (void **)&next_madvise, 0},
  {"mmap", (void *)hook_mmap, (void **)&next_mmap, 0},
  {"mmap64", (void *)hook_mmap64, (void **)&next_mmap64, 1},
};
#define NHOOKS (sizeof(hooks) / sizeof(hooks[0]))

static pthread_mutex_t g_patch_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_failed; /* a slot that could not be written */

/* The loader relocates most dynamic sections' addresses in place; some
 * (read-only ones, the vDSO's) keep the file's offsets. */
static uintptr_t dyn_addr(const struct dl_phdr_info *info, ElfW(Addr) p)
{
  return p < info->dlpi_addr ? info->dlpi_addr + p : p;
}

static void patch_slot(void **slot, void *hook, uintptr_t relro_s, uintptr_t relro_e)
{
  if (__atomic_load_n(slot, __ATOMIC_RELAXED) == hook)
    return;
  long page = sysconf(_SC_PAGESIZE);
  void *pg = (void *)((uintptr_t)slot & ~(uintptr_t)(page - 1));
  int ro = (uintptr_t)slot >= relro_s && (uintptr_t)slot < relro_e;
  if (ro && mprotect(pg, (size_t)page, PROT_READ | PROT_WRITE) != 0) {
    __atomic_store_n(&g_failed, 1, __ATOMIC_RELAXED);
    return;
  }
  __atomic_store_n(slot, hook, __ATOMIC_RELEASE);
  if (ro)
    mprotect(pg, (size_t)page, PROT_READ);
}

static void patch_relocs(const struct dl_phdr_info *info, const ElfW(Rela) *r, size_t bytes,
                         const ElfW(Sym) *syms, const char *strs, uintptr_t rs, uintptr_t re)
{
  for (size_t i = 0; i < bytes / sizeof(*r); i++) {
    unsigned long type = ELF64_R_TYPE(r[i].r_info);
    if (type != R_SLOT && type != R_GOT)
      continue;
    const char *name = strs + syms[ELF64_R_SYM(r[i].r_info)].st_name;
    for (size_t h = 0; h < NHOOKS; h++)
      if (*hooks[h].next && strcmp(name, hooks[h].name) == 0)
        patch_slot((void **)(info->dlpi_addr + r[i].r_offset), hooks[h].hook, rs, re);
  }
}

static int patch_object(struct dl_phdr_info *info, size_t size, void *arg)
{
  const ElfW(Phdr) *dynph = NULL;
  uintptr_t rs = 0, re = 0;
  (void)size;
  (void)arg;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type == PT_DYNAMIC)
      dynph = ph;
    else if (ph->p_type == PT_GNU_RELRO) {
      rs = info->dlpi_addr + ph->p_vaddr;
      re = rs + ph->p_memsz;
    }
  }
  if (!dynph)
    return 0;
  const ElfW(Sym) *syms = NULL;
  const char *strs = NULL;
  const ElfW(Rela) *jmprel = NULL, *rela = NULL;
  size_t jmpsz = 0, relasz = 0;
  int pltrela = 1;
  for (const ElfW(Dyn) *d = (const ElfW(Dyn) *)(info->dlpi_addr + dynph->p_vaddr);
       d->d_tag != DT_NULL; d++) {
    switch (d->d_tag) {
    case DT_SYMTAB: syms = (const ElfW(Sym) *)dyn_addr(info, d->d_un.d_ptr); break;
    case DT_STRTAB: strs = (const char *)dyn_addr(info, d->d_un.d_ptr); break;
    case DT_JMPREL: jmprel = (const ElfW(Rela) *)dyn_addr(info, d->d_un.d_ptr); break;
    case DT_PLTRELSZ: jmpsz = d->d_un.d_val; break;
    case DT_RELA: rela = (const ElfW(Rela) *)dyn_addr(info, d->d_un.d_ptr); break;
    case DT_RELASZ: relasz = d->d_un.d_val; break;
    case DT_PLTREL: pltrela = d->d_un.d_val == DT_RELA; break;
    default: break;
    }
  }
  if (!syms || !strs || !pltrela)
    return 0; /* nothing to patch, or REL entries, which these targets never use */
  if (jmprel)
    patch_relocs(info, jmprel, jmpsz, syms, strs, rs, re);
  if (rela)
    patch_relocs(info, rela, relasz, syms, strs, rs, re);
  return 0;
}

/* The loader's count of objects it has loaded (never decreases). */
static int read_adds(struct dl_phdr_info *info, size_t size, void *arg)
{
  *(unsigned long long *)arg = info->dlpi_adds;
  return 1; /* the first object says it */
}

static unsigned long long g_adds;                /* at the last walk */
static _Atomic unsigned long g_gen;              /* walks that found new objects */
static int g_installed, g_install_rc;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void patch_all(void)
{
  unsigned long long adds = 0;
  dl_iterate_phdr(read_adds, &adds);
  dl_iterate_phdr(patch_object, NULL);
  __atomic_store_n(&g_adds, adds, __ATOMIC_RELEASE);
}

unsigned long rmx__memhooks_sync(void)
{
  unsigned long long adds = 0;
  if (!__atomic_load_n(&g_installed, __ATOMIC_ACQUIRE))
    return 0;
  dl_iterate_phdr(read_adds, &adds);
  if (adds != __atomic_load_n(&g_adds, __ATOMIC_ACQUIRE)) {
    pthread_mutex_lock(&g_patch_lock);
    if (adds != g_adds) {
      patch_all();
      g_gen++;
    }
    pthread_mutex_unlock(&g_patch_lock);
  }
  return g_gen;
}

static void install_once(void)
{
  for (size_t h = 0; h < NHOOKS; h++) {
    *hooks[h].next = dlsym(RTLD_DEFAULT, hooks[h].name);
    if (!*hooks[h].next && !hooks[h].optional) {
      g_install_rc = RMX_ENOTSUP;
      return;
    }
  }
  pthread_mutex_lock(&g_patch_lock);
  patch_all();
  pthread_mutex_unlock(&g_patch_lock);
  g_install_rc = g_failed ? RMX_EIO : 0;
  __atomic_store_n(&g_installed, g_install_rc == 0, __ATOMIC_RELEASE);
}

int rmx__memhooks_install(void (*note)(const void *addr, size_t len))
{
  if (!g_note)
    g_note = note; /* before any slot points at a hook */
  pthread_once(&g_once, install_once);
  return g_install_rc;
}

int rmx__memhooks_failed(void) { return __atomic_load_n(&g_failed, __ATOMIC_RELAXED); }

void rmx__memhooks_on_map(void (*fn)(const void *addr, size_t len)) { g_mapped = fn; }

void rmx__memhooks_hold(void) { pthread_mutex_lock(&g_patch_lock); }

void rmx__memhooks_release(void) { pthread_mutex_unlock(&g_patch_lock); }

void rmx__memhooks_release_child(void) { pthread_mutex_init(&g_patch_lock, NULL); }

#else /* no hooks: built without them, or a target this file does not know */

int rmx__memhooks_install(void (*note)(const void *addr, size_t len))
{
  (void)note;
  return RMX_ENOTSUP;
}

int rmx__memhooks_failed(void) { return 0; }

void rmx__memhooks_on_map(void (*fn)(const void *addr, size_t len)) { (void)fn; }

void rmx__memhooks_hold(void) {}

void rmx__memhooks_release(void) {}

void rmx__memhooks_release_child(void) {}

unsigned long rmx__memhooks_sync(void) { return 0; }

#endif
