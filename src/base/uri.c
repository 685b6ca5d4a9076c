/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "log.h"
#include "uri.h"

#include <rmx/rmx.h>

#define RMX_DEFAULT_PORT "7471"

/* scheme://host[:port], scheme lower-case letters and digits (which schemes
 * exist is the transport registry's business), host a name, an IPv4
 * literal or [IPv6]. */
static int bad(rmx__uri_t *u, const char *why)
{
  u->why = why;
  return RMX_EINVAL;
}

/* shm://NAME: a socket's path, or "@" and an abstract name; no port. */
static int parse_name(const char *name, rmx__uri_t *u)
{
  size_t n = strlen(name);
  if (n == 0 || (name[0] == '@' && n == 1))
    return bad(u, "no socket name after shm:// (a path, or @ and a name)");
  if (n > RMX_URI_NAME_MAX)
    return bad(u, "the socket name is longer than 107 bytes");
  if (name[0] != '/' && name[0] != '@' && name[0] != '.' && strchr(name, ':'))
    return bad(u, "shm:// takes a socket path or @NAME, not HOST:PORT (a tcp://, rdma:// "
                  "or auto:// listener at HOST:PORT answers auto:// clients of this host over "
                  "shm; a relative path with a colon starts with ./)");
  memcpy(u->host, name, n + 1);
  u->port[0] = '\0';
  u->why = NULL;
  return 0;
}

int rmx__uri_unix(const char *name, struct sockaddr_storage *ss)
{
  struct sockaddr_un *un = (void *)ss;
  size_t n = name ? strlen(name) : 0;
  if (n == 0 || n > RMX_URI_NAME_MAX || (name[0] == '@' && n == 1))
    return RMX_EINVAL;
  memset(ss, 0, sizeof(*ss));
  un->sun_family = AF_UNIX;
  if (name[0] == '@') /* abstract: a NUL, then the name */
    memcpy(un->sun_path + 1, name + 1, n - 1);
  else
    memcpy(un->sun_path, name, n);
  return 0;
}

int rmx__uri_parse(const char *uri, rmx__uri_t *u)
{
  if (!uri)
    return bad(u, "no URI");
  const char *sep = strstr(uri, "://");
  if (!sep)
    return bad(u, "no \"://\" after the scheme");
  size_t slen = (size_t)(sep - uri);
  if (slen == 0)
    return bad(u, "no scheme before \"://\"");
  if (slen >= sizeof(u->scheme) || strspn(uri, "abcdefghijklmnopqrstuvwxyz0123456789") != slen)
    return bad(u, "the scheme is not lower-case letters and digits (at most 15)");
  memcpy(u->scheme, uri, slen);
  u->scheme[slen] = '\0';
  if (strcmp(u->scheme, "shm") == 0)
    return parse_name(sep + 3, u);

  const char *h = sep + 3, *hend, *rest;
  if (*h == '[') {
    hend = strchr(h, ']');
    if (!hend)
      return bad(u, "an IPv6 address without its closing ']'");
    h++;
    rest = hend + 1;
  } else {
    hend = h + strcspn(h, ":/");
    rest = hend;
  }
  size_t hlen = (size_t)(hend - h);
  if (hlen == 0)
    return bad(u, "no host");
  if (hlen >= sizeof(u->host))
    return bad(u, "the host is longer than 255 bytes");
  memcpy(u->host, h, hlen);
  u->host[hlen] = '\0';
  if (sep[3] != '[' && memchr(u->host, ']', hlen))
    return bad(u, "a ']' in the host without its '['");

  const char *port = RMX_DEFAULT_PORT;
  size_t plen = strlen(port);
  if (*rest == ':') {
    port = rest + 1;
    plen = strspn(port, "0123456789");
    if (plen > 0 && port[plen] == '/')
      return bad(u, "a path after the port: rmx URIs end at the port");
    if (plen == 0 || port[plen] != '\0')
      return bad(u, "the port is not a number");
    if (plen > 5 || strtoul(port, NULL, 10) > 65535)
      return bad(u, "the port is over 65535");
  } else if (*rest != '\0') {
    return bad(u, "something after the host that is not \":PORT\"");
  }
  memcpy(u->port, port, plen);
  u->port[plen] = '\0';
  u->why = NULL;
  return 0;
}

int rmx__uri_of(const char *scheme, const struct sockaddr_storage *ss, char *buf, size_t len)
{
  char addr[RMX_URI_NAME_MAX + 2];
  rmx__sa_str((const struct sockaddr *)ss, addr, sizeof(addr));
  int n = snprintf(buf, len, "%s://%s", scheme, addr);
  return n < 0 || (size_t)n >= len ? RMX_EINVAL : 0;
}
