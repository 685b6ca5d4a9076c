/* SPDX-License-Identifier: BSD-3-Clause */
/* rmx URIs: scheme://host[:port], and shm://NAME (a Unix socket's path, or
 * "@" and an abstract name). Base layer: transports may include it. */
#ifndef RMX_BASE_URI_H
#define RMX_BASE_URI_H

typedef struct rmx__uri {
  char scheme[16];
  char host[256];
  char port[8];
  const char *why; /* after RMX_EINVAL: which part is wrong, and how */
} rmx__uri_t;

/* 0, or RMX_EINVAL when uri is not of that form (u->why says why). The
 * port defaults to 7471. shm://NAME: host is the name, port empty. */
int rmx__uri_parse(const char *uri, rmx__uri_t *u);

/* The longest Unix socket name shm:// takes (sun_path less its NUL). */
#define RMX_URI_NAME_MAX 107

struct sockaddr_storage;

/* The AF_UNIX address of a socket name ("/path", "rel/path" or "@name"):
 * 0, or RMX_EINVAL. */
int rmx__uri_unix(const char *name, struct sockaddr_storage *ss);

/* "scheme://address:port" of a bound address into buf: 0, or RMX_EINVAL
 * when it does not fit (buf then holds it cut short). */
int rmx__uri_of(const char *scheme, const struct sockaddr_storage *ss, char *buf, size_t len);

#endif
