/* SPDX-License-Identifier: BSD-3-Clause */
/* Intrusive doubly linked list: objects embed rmx_list_t, no allocation. */
#ifndef RMX_LIST_H
#define RMX_LIST_H

#include <stddef.h>

typedef struct rmx_list {
  struct rmx_list *next, *prev;
} rmx_list_t;

#define rmx_container_of(ptr, type, field) \
  ((type *)(void *)((char *)(ptr) - offsetof(type, field)))

static inline void rmx_list_init(rmx_list_t *l) { l->next = l->prev = l; }
static inline int rmx_list_empty(const rmx_list_t *l) { return l->next == l; }

static inline void rmx_list_push(rmx_list_t *head, rmx_list_t *n)
{
  n->prev = head->prev;
  n->next = head;
  head->prev->next = n;
  head->prev = n;
}

static inline void rmx_list_push_front(rmx_list_t *head, rmx_list_t *n)
{
  rmx_list_push(head->next, n);
}

static inline void rmx_list_del(rmx_list_t *n)
{
  n->prev->next = n->next;
  n->next->prev = n->prev;
  n->next = n->prev = n;
}

/* First element removed, or NULL when empty. */
static inline rmx_list_t *rmx_list_pop(rmx_list_t *head)
{
  rmx_list_t *n = head->next;
  if (n == head)
    return NULL;
  rmx_list_del(n);
  return n;
}

/* Move every element of src to the tail of dst, leaving src empty. */
static inline void rmx_list_splice(rmx_list_t *dst, rmx_list_t *src)
{
  if (rmx_list_empty(src))
    return;
  src->next->prev = dst->prev;
  dst->prev->next = src->next;
  src->prev->next = dst;
  dst->prev = src->prev;
  rmx_list_init(src);
}

#define rmx_list_foreach(it, head) for ((it) = (head)->next; (it) != (head); (it) = (it)->next)

#endif
