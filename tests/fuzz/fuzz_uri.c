/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rmx__uri_parse: a user's URI (rmx_listen, rmx_connect). What it accepts
 * names a known scheme, a host that fits, and a port of 1..5 digits no
 * larger than 65535; or, for shm://, a socket name and no port.
 */
#include <string.h>

#include "fuzz.h"
#include "rmx_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  char *s = malloc(size + 1); /* exact size: ASan sees a read past the NUL */
  if (!s)
    return 0;
  memcpy(s, data, size);
  s[size] = '\0';
  rmx__uri_t u;
  memset(&u, 0x5a, sizeof(u));
  int rc = rmx__uri_parse(s, &u);
  if (rc) {
    FUZZ_CHECK(rc == RMX_EINVAL);
    free(s);
    return 0;
  }
  size_t slen = strnlen(u.scheme, sizeof(u.scheme));
  FUZZ_CHECK(slen > 0 && slen < sizeof(u.scheme) &&
             strspn(u.scheme, "abcdefghijklmnopqrstuvwxyz0123456789") == slen);
  const char *name = u.scheme;
  FUZZ_CHECK(strncmp(s, name, strlen(name)) == 0 && strncmp(s + strlen(name), "://", 3) == 0);
  size_t hlen = strnlen(u.host, sizeof(u.host));
  FUZZ_CHECK(hlen > 0 && hlen < sizeof(u.host));
  if (strcmp(name, "shm") == 0) {
    /* a socket name, the rest of the input whole: a path or @ and a name,
     * never HOST:PORT (a colon only in an absolute, ./ or @ name) */
    FUZZ_CHECK(u.port[0] == '\0' && strcmp(u.host, s + 6) == 0 && hlen <= 107);
    FUZZ_CHECK(!(u.host[0] == '@' && hlen == 1));
    FUZZ_CHECK(!strchr(u.host, ':') || u.host[0] == '/' || u.host[0] == '@' || u.host[0] == '.');
    free(s);
    return 0;
  }
  size_t plen = strnlen(u.port, sizeof(u.port));
  FUZZ_CHECK(plen > 0 && plen <= 5 && strspn(u.port, "0123456789") == plen);
  FUZZ_CHECK(strtoul(u.port, NULL, 10) <= 65535);
  /* the host is a piece of the input, brackets stripped */
  FUZZ_CHECK(strstr(s, u.host) != NULL);
  if (u.host[0] != '\0' && s[strlen(name) + 3] != '[')
    FUZZ_CHECK(strpbrk(u.host, ":/]") == NULL);
  free(s);
  return 0;
}
