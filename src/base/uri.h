/* SPDX-License-Identifier: BSD-3-Clause */
/* rmx URIs: scheme://host[:port]. Base layer: transports may include it. */
#ifndef RMX_BASE_URI_H
#define RMX_BASE_URI_H

typedef struct rmx__uri {
  char scheme[16];
  char host[256];
  char port[8];
  const char *why; /* after RMX_EINVAL: which part is wrong, and how */
} rmx__uri_t;

/* 0, or RMX_EINVAL when uri is not of that form (u->why says why). The
 * port defaults to 7471. */
int rmx__uri_parse(const char *uri, rmx__uri_t *u);

#endif
