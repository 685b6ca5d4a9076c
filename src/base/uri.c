#include <stdlib.h>
#include <string.h>

#include "uri.h"

#include <rmx/rmx.h>

#define RMX_DEFAULT_PORT "7471"

/* scheme://host[:port], scheme lower-case letters and digits (which schemes
 * exist is the transport registry's business), host a name, an IPv4
 * literal or [IPv6]. */
int rmx__uri_parse(const char *uri, rmx__uri_t *u)
{
  if (!uri)
    return RMX_EINVAL;
  const char *sep = strstr(uri, "://");
  if (!sep)
    return RMX_EINVAL;
  size_t slen = (size_t)(sep - uri);
  if (slen == 0 || slen >= sizeof(u->scheme) || strspn(uri, "abcdefghijklmnopqrstuvwxyz0123456789") != slen)
    return RMX_EINVAL;
  memcpy(u->scheme, uri, slen);
  u->scheme[slen] = '\0';

  const char *h = sep + 3, *hend, *rest;
  if (*h == '[') {
    hend = strchr(h, ']');
    if (!hend)
      return RMX_EINVAL;
    h++;
    rest = hend + 1;
  } else {
    hend = h + strcspn(h, ":/");
    rest = hend;
  }
  size_t hlen = (size_t)(hend - h);
  if (hlen == 0 || hlen >= sizeof(u->host))
    return RMX_EINVAL;
  memcpy(u->host, h, hlen);
  u->host[hlen] = '\0';
  if (sep[3] != '[' && memchr(u->host, ']', hlen))
    return RMX_EINVAL;

  const char *port = RMX_DEFAULT_PORT;
  size_t plen = strlen(port);
  if (*rest == ':') {
    port = rest + 1;
    plen = strspn(port, "0123456789");
    if (plen == 0 || plen > 5 || port[plen] != '\0')
      return RMX_EINVAL;
    if (strtoul(port, NULL, 10) > 65535)
      return RMX_EINVAL;
  } else if (*rest != '\0') {
    return RMX_EINVAL;
  }
  memcpy(u->port, port, plen);
  u->port[plen] = '\0';
  return 0;
}
