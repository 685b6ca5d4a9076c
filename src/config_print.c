/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rmx_config_print (rmx-info -c) and docs/tuning.md's reference table,
 * both from the settings table (config.c).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "rmx_int.h"

static int is_text(const rmx__setting_t *s)
{
  return s->type == RMX__SET_STR || s->type == RMX__SET_SECRET;
}

static const char *const src_name[] = {"default", "environment", "refused", "code"};

/* A setting's value as text (never the secret: the file's path, if any). */
static void value_text(const rmx__setting_t *s, const rmx_config_t *c, int src, char *buf,
                       size_t len)
{
  const char *p = (const char *)c + s->offset;
  if (s->type == RMX__SET_SECRET) {
    const char *path = getenv(s->env);
    snprintf(buf, len, "%s", src == RMX__SRC_ENV ? path : src == RMX__SRC_CODE && *p ? "(set in code)" : "");
  } else if (s->type == RMX__SET_STR) {
    snprintf(buf, len, "%.*s", (int)strnlen(p, s->width), p);
  } else {
    uint64_t x = rmx__setting_get(c, s);
    if (s->type == RMX__SET_WORD && x <= s->max)
      snprintf(buf, len, "%s", s->words[x]);
    else
      snprintf(buf, len, "%" PRIu64, x);
  }
}

static void default_text(const rmx__setting_t *s, char *buf, size_t len)
{
  if (s->type == RMX__SET_WORD)
    snprintf(buf, len, "%s", s->words[s->def]);
  else if (is_text(s))
    buf[0] = '\0';
  else
    snprintf(buf, len, "%" PRIu64, s->def);
}

/* What a setting accepts, in words. */
static void range_text(const rmx__setting_t *s, char *buf, size_t len)
{
  buf[0] = '\0';
  if (s->type == RMX__SET_WORD) {
    for (uint64_t i = 0; i <= s->max; i++)
      snprintf(buf + strlen(buf), len - strlen(buf), "%s%s", i ? ", " : "", s->words[i]);
  } else if (s->type == RMX__SET_STR) {
    snprintf(buf, len, "at most %u bytes", s->width - 1u);
  } else if (s->type == RMX__SET_SECRET) {
    snprintf(buf, len, "a file's path");
  } else {
    snprintf(buf, len, "%" PRIu64 " .. %" PRIu64 "%s", s->min, s->max,
             s->type == RMX__SET_SIZE ? " (K, M, G, T suffixes)" : "");
  }
}

static void json_string(FILE *out, const char *s)
{
  fputc('"', out);
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\')
      fprintf(out, "\\%c", ch);
    else if (ch < 0x20)
      fprintf(out, "\\u%04x", ch);
    else
      fputc(ch, out);
  }
  fputc('"', out);
}

/* A number or word setting's value as JSON: a number, or the word. */
static void json_value(FILE *out, const rmx__setting_t *s, const char *text)
{
  if (s->type == RMX__SET_NUM || s->type == RMX__SET_SIZE)
    fputs(text, out);
  else
    json_string(out, text);
}

static void print_json(FILE *out, const rmx__setting_t *s, const char *val, const char *def,
                       int src, int last)
{
  fputs("    {\"name\": ", out);
  json_string(out, s->env);
  fputs(", \"field\": ", out);
  json_string(out, s->field);
  fputs(", \"value\": ", out);
  json_value(out, s, val);
  fputs(", \"default\": ", out);
  json_value(out, s, def);
  fprintf(out, ", \"source\": \"%s\"", src_name[src]);
  if (s->type == RMX__SET_NUM || s->type == RMX__SET_SIZE) {
    fprintf(out, ", \"min\": %" PRIu64 ", \"max\": %" PRIu64, s->min, s->max);
  } else if (s->type == RMX__SET_WORD) {
    fputs(", \"values\": [", out);
    for (uint64_t i = 0; i <= s->max; i++) {
      fputs(i ? ", " : "", out);
      json_string(out, s->words[i]);
    }
    fputc(']', out);
  } else if (s->type == RMX__SET_STR) {
    fprintf(out, ", \"max_length\": %u", s->width - 1u);
  }
  fputs(", \"description\": ", out);
  json_string(out, s->desc);
  fprintf(out, "}%s\n", last ? "" : ",");
}

static void print_text(FILE *out, const rmx__setting_t *s, const char *val, const char *def,
                       int src, int brief)
{
  fprintf(out, "%s=%s  ", s->env, val);
  if (src == RMX__SRC_DEFAULT)
    fputs("(default)\n", out);
  else if (src == RMX__SRC_REFUSED)
    fprintf(out, "(default: %s=%s in the environment was refused)\n", s->env, getenv(s->env));
  else
    fprintf(out, "(%s; default %s)\n", src_name[src], *def ? def : "empty");
  if (brief)
    return;
  char range[128];
  range_text(s, range, sizeof(range));
  fprintf(out, "    %s: %s Accepts %s.\n", s->field, s->desc, range);
}

int rmx_config_print(const rmx_config_t *cfg, FILE *out, unsigned flags)
{
  rmx_config_t env, given;
  uint8_t src[RMX__NSETTINGS_MAX];
  int rc;
  if (!out || (flags & ~(unsigned)(RMX_CONFIG_PRINT_JSON | RMX_CONFIG_PRINT_BRIEF)))
    return RMX_EINVAL;
  if (cfg && (rc = rmx__config_take(&given, cfg)) != 0)
    return rc;
  /* What the defaults and the environment give: a value that differs was
   * set in code. */
  rmx__config_env(&env, src, 1);
  const rmx_config_t *c = cfg ? &given : &env;
  int json = flags & RMX_CONFIG_PRINT_JSON;
  if (json)
    fputs("{\n  \"settings\": [\n", out);
  for (size_t i = 0; i < rmx__nsettings; i++) {
    const rmx__setting_t *s = &rmx__settings[i];
    const char *p = (const char *)c + s->offset, *q = (const char *)&env + s->offset;
    char val[160], def[32];
    if (s->type == RMX__SET_SECRET) { /* never read from the file here */
      const char *path = getenv(s->env);
      int from_env = path && *path;
      /* A configuration without the secret the environment names: the
       * file was refused (rmx__config_env checked it), or it was cleared in
       * code. */
      int refused = src[i] == RMX__SRC_REFUSED;
      src[i] = *p ? (from_env ? RMX__SRC_ENV : RMX__SRC_CODE)
               : from_env ? (refused ? RMX__SRC_REFUSED : cfg ? RMX__SRC_CODE : RMX__SRC_ENV)
                          : RMX__SRC_DEFAULT;
    } else if (s->type == RMX__SET_STR ? strncmp(p, q, s->width) != 0
                                       : rmx__setting_get(c, s) != rmx__setting_get(&env, s)) {
      src[i] = RMX__SRC_CODE;
    }
    value_text(s, c, src[i], val, sizeof(val));
    default_text(s, def, sizeof(def));
    if (json)
      print_json(out, s, val, def, src[i], i + 1 == rmx__nsettings);
    else
      print_text(out, s, val, def, src[i], flags & RMX_CONFIG_PRINT_BRIEF);
  }
  if (json)
    fputs("  ]\n}\n", out);
  if (cfg)
    memset(given.auth_secret, 0, sizeof(given.auth_secret));
  return ferror(out) ? RMX_EIO : 0;
}

void rmx__config_markdown(FILE *out)
{
  fputs("| variable | field | default | accepts | what it does |\n"
        "|---|---|---|---|---|\n",
        out);
  for (size_t i = 0; i < rmx__nsettings; i++) {
    const rmx__setting_t *s = &rmx__settings[i];
    char range[128], def[32];
    range_text(s, range, sizeof(range));
    default_text(s, def, sizeof(def));
    fprintf(out, "| `%s` | `%s` | %s | %s | %s |\n", s->env, s->field, *def ? def : "(empty)",
            range, s->desc);
  }
}
