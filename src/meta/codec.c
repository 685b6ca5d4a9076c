/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the metadata service writes and reads: base64 (etcd's JSON gateway
 * carries keys and values as base64 strings; neither libcurl nor json-c
 * exports a codec, and these thirty lines are cheaper than a dependency
 * for it), the names and keys under the prefix, and JSON helpers.
 */
#include <stdlib.h>
#include <string.h>

#include "meta/meta.h"

static const char b64_alpha[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *rmx__b64_enc(const void *p, size_t n)
{
  const uint8_t *s = p;
  char *out = malloc((n + 2) / 3 * 4 + 1), *o = out;
  if (!out)
    return NULL;
  for (size_t i = 0; i < n; i += 3) {
    uint32_t v = (uint32_t)s[i] << 16;
    if (i + 1 < n)
      v |= (uint32_t)s[i + 1] << 8;
    if (i + 2 < n)
      v |= s[i + 2];
    *o++ = b64_alpha[v >> 18];
    *o++ = b64_alpha[(v >> 12) & 63];
    *o++ = i + 1 < n ? b64_alpha[(v >> 6) & 63] : '=';
    *o++ = i + 2 < n ? b64_alpha[v & 63] : '=';
  }
  *o = '\0';
  return out;
}

static int b64_val(char c)
{
  const char *p = c ? strchr(b64_alpha, c) : NULL;
  return p ? (int)(p - b64_alpha) : -1;
}

char *rmx__b64_dec(const char *s, size_t *n)
{
  size_t len = strlen(s);
  while (len && s[len - 1] == '=')
    len--;
  if (len % 4 == 1)
    return NULL;
  char *out = malloc(len / 4 * 3 + 3), *o = out;
  if (!out)
    return NULL;
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < len; i++) {
    int v = b64_val(s[i]);
    if (v < 0) {
      free(out);
      return NULL;
    }
    acc = (acc << 6) | (uint32_t)v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      *o++ = (char)((acc >> bits) & 0xff);
    }
  }
  *o = '\0';
  *n = (size_t)(o - out);
  return out;
}

/* 1 .. max - 1 bytes from lo to '~'; agents (lo '!') without '/'. */
static int printable(const char *s, size_t max, char lo, int slash_ok)
{
  size_t n = 0;
  for (; s[n]; n++)
    if (n + 1 >= max || s[n] < lo || s[n] > 0x7e || (s[n] == '/' && !slash_ok))
      return 0;
  return n > 0;
}

int rmx__meta_agent_ok(const char *s) { return s && printable(s, RMX_META_AGENT_MAX, '!', 0); }

int rmx__meta_name_ok(const char *s) { return s && printable(s, RMX_NAME_MAX, ' ', 1); }

char *rmx__meta_key(const rmx_meta_t *m, const char *a, const char *b, const char *c,
                    const char *d)
{
  size_t n = strlen(m->prefix) + strlen(a) + (b ? strlen(b) : 0) + (c ? strlen(c) : 0) +
             (d ? strlen(d) : 0) + 1;
  char *k = malloc(n);
  if (k)
    snprintf(k, n, "%s%s%s%s%s", m->prefix, a, b ? b : "", c ? c : "", d ? d : "");
  return k;
}

int rmx__meta_add_b64(json_object *o, const char *k, const char *v)
{
  char *e = rmx__b64_enc(v, strlen(v));
  json_object *s = e ? json_object_new_string(e) : NULL;
  free(e);
  if (!s || json_object_object_add(o, k, s) != 0) {
    json_object_put(s);
    return RMX_ENOMEM;
  }
  return 0;
}

char *rmx__meta_text(json_object *o)
{
  const char *t = o ? json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN) : NULL;
  char *out = t ? strdup(t) : NULL;
  json_object_put(o);
  return out;
}

json_object *rmx__meta_parse(rmx__meta_req_t *r)
{
  json_object *o = r->resp ? json_tokener_parse(r->resp) : NULL;
  if (o && json_object_is_type(o, json_type_object))
    return o;
  json_object_put(o);
  RMX_LOG_LIMITED(r->m->ctx, &r->m->rl, ERROR, "meta: etcd at %s: %s: the answer is not JSON",
                  r->m->endpoint, r->what);
  return NULL;
}

int64_t rmx__meta_int(json_object *o, const char *key, int64_t def)
{
  json_object *v;
  if (!o || !json_object_object_get_ex(o, key, &v))
    return def;
  if (json_object_is_type(v, json_type_string)) {
    char *end;
    const char *s = json_object_get_string(v);
    long long x = strtoll(s, &end, 10);
    return end != s && *end == '\0' ? (int64_t)x : def;
  }
  if (json_object_is_type(v, json_type_int))
    return json_object_get_int64(v);
  return def;
}
