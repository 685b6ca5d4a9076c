/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What this process holds, for the kills test: every fd and what it links
 * to (memfds, eventfds and Unix sockets among them), and its memfd:rmx
 * mappings, compared with a baseline.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fault_kills_srv.h"

static int cmp_fd(const void *a, const void *b)
{
  const int *x = a, *y = b;
  return (*x > *y) - (*x < *y);
}

void fk_inventory(fd_inv_t *v)
{
  struct { int fd; char what[96]; } e[MAX_FDS];
  int n = 0;
  DIR *d = opendir("/proc/self/fd");
  if (d) {
    int self = dirfd(d);
    struct dirent *de;
    while ((de = readdir(d)) != NULL && n < MAX_FDS) {
      char path[64];
      int fd = atoi(de->d_name);
      if (de->d_name[0] == '.' || fd == self)
        continue;
      snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
      ssize_t k = readlink(path, e[n].what, sizeof(e[n].what) - 1);
      e[n].what[k < 0 ? 0 : k] = '\0';
      e[n++].fd = fd;
    }
    closedir(d);
  }
  qsort(e, (size_t)n, sizeof(e[0]), cmp_fd);
  v->n = n;
  for (int i = 0; i < n; i++) {
    v->fd[i] = e[i].fd;
    memcpy(v->what[i], e[i].what, sizeof(v->what[i]));
  }
  v->memfd_maps = 0;
  FILE *f = fopen("/proc/self/maps", "r");
  char line[512];
  while (f && fgets(line, sizeof(line), f))
    v->memfd_maps += strstr(line, "memfd:rmx") != NULL;
  if (f)
    fclose(f);
}

int fk_inv_same(const fd_inv_t *a, const fd_inv_t *b)
{
  if (a->n != b->n || a->memfd_maps != b->memfd_maps)
    return 0;
  for (int i = 0; i < a->n; i++)
    if (a->fd[i] != b->fd[i] || strcmp(a->what[i], b->what[i]))
      return 0;
  return 1;
}

void fk_inv_print(const char *title, const fd_inv_t *v)
{
  int sock = 0, ev = 0, mfd = 0;
  for (int i = 0; i < v->n; i++) {
    sock += strncmp(v->what[i], "socket:", 7) == 0;
    ev += strcmp(v->what[i], "anon_inode:[eventfd]") == 0;
    mfd += strncmp(v->what[i], "/memfd:rmx", 10) == 0;
  }
  printf("fault-kills: %s: %d fds (%d sockets, %d eventfds, %d rmx memfds), %d rmx memfd "
         "mappings\n", title, v->n, sock, ev, mfd, v->memfd_maps);
}

/* What differs from the baseline, one line each. */
void fk_inv_diff(const fd_inv_t *b, const fd_inv_t *now)
{
  for (int i = 0, j = 0; i < b->n || j < now->n;) {
    if (j == now->n || (i < b->n && b->fd[i] < now->fd[j]))
      printf("  - fd %d %s (gone)\n", b->fd[i], b->what[i]), i++;
    else if (i == b->n || now->fd[j] < b->fd[i])
      printf("  + fd %d %s (left behind)\n", now->fd[j], now->what[j]), j++;
    else {
      if (strcmp(b->what[i], now->what[j]))
        printf("  ~ fd %d was %s, is %s\n", b->fd[i], b->what[i], now->what[j]);
      i++, j++;
    }
  }
  if (b->memfd_maps != now->memfd_maps)
    printf("  memfd:rmx mappings: %d, before the first client %d\n", now->memfd_maps,
           b->memfd_maps);
}
