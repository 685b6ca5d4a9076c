/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The settings table: every field of rmx_config_t with its environment
 * variable, default, range and meaning, in one place. Parsing the
 * environment (rmx_config_init), checking a configuration passed in code
 * (rmx_ctx_create), the warning about unknown RMX_* variables,
 * rmx_config_print (and so rmx-info -c) and docs/tuning.md's reference
 * table all read it.
 */
#ifndef RMX_CONFIG_H
#define RMX_CONFIG_H

#include <rmx/rmx.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum {
  RMX__SET_NUM,    /* unsigned decimal number, 4 or 8 bytes wide */
  RMX__SET_SIZE,   /* the same, with a K, M, G or T suffix allowed (bytes) */
  RMX__SET_WORD,   /* one of words[0 .. max], stored as its index (an enum) */
  RMX__SET_STR,    /* a string of at most width - 1 bytes */
  RMX__SET_SECRET, /* the authentication secret: read from the file the variable names */
} rmx__set_type_t;

typedef struct rmx__setting {
  const char *env;   /* the environment variable */
  const char *field; /* the rmx_config_t member */
  uint16_t offset, width;
  rmx__set_type_t type;
  uint64_t def, min, max;   /* numbers; words: index of the default, 0, last index */
  const char *const *words; /* RMX__SET_WORD: max + 1 accepted words */
  const char *desc;         /* what it means, one sentence */
} rmx__setting_t;

#define RMX__NSETTINGS_MAX 40
extern const rmx__setting_t rmx__settings[];
extern const size_t rmx__nsettings;

/* Where a setting's value came from (rmx_config_print). */
enum { RMX__SRC_DEFAULT, RMX__SRC_ENV, RMX__SRC_REFUSED, RMX__SRC_CODE };

/* The setting of variable @p env, or NULL. */
const rmx__setting_t *rmx__setting_find(const char *env);

/* The value of a number or word setting in @p cfg. */
uint64_t rmx__setting_get(const rmx_config_t *cfg, const rmx__setting_t *s);

/* Parse @p text as the value of @p s (not RMX__SET_STR/SECRET): 0 and *out,
 * or RMX_EINVAL and the message ("RMX_X=text is ...") in msg. Numbers are
 * decimal only: a leading 0 is not octal, 0x is refused. */
int rmx__setting_parse(const rmx__setting_t *s, const char *text, uint64_t *out, char *msg,
                       size_t msglen);

/* Defaults, then the environment. @p src (rmx__nsettings entries, or NULL)
 * gets each setting's source; @p quiet: log nothing and leave the
 * authentication secret unread. Returns 0 or RMX_EINVAL. */
int rmx__config_env(rmx_config_t *cfg, uint8_t *src, int quiet);

/* A caller's configuration, as large as its header knew it, into @p out
 * (the fields it did not know get their defaults); RMX_EINVAL, logged,
 * for a size this library cannot know. */
int rmx__config_take(rmx_config_t *out, const rmx_config_t *cfg);

/* Every field in range and the rules between fields kept; else a log line
 * naming the field(s) (at the configuration's log level) and RMX_EINVAL. */
int rmx__config_check(const rmx_config_t *cfg);

/* The reference table of docs/tuning.md (Markdown), from the settings table. */
void rmx__config_markdown(FILE *out);

#endif
