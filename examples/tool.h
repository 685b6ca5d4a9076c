/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the command-line tools share: -h/--help (usage on stdout, exit 0),
 * usage errors (a line saying what is wrong and the usage on stderr, exit
 * 2), and numbers checked whole.
 */
#ifndef RMX_EXAMPLES_TOOL_H
#define RMX_EXAMPLES_TOOL_H

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *tool_usage_text, *tool_name = "rmx";

/* A usage error: what is wrong, then the usage; exit 2. */
__attribute__((noreturn, format(printf, 1, 2))) static void tool_bad(const char *fmt, ...)
{
  va_list ap;
  fprintf(stderr, "%s: ", tool_name);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\n%s", tool_usage_text);
  exit(2);
}

/* Options before the operands: -h/--help, nothing else. Returns the index
 * of the first operand. */
__attribute__((unused)) static int tool_options(int argc, char **argv, const char *usage)
{
  static const struct option opts[] = {{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
  int ch;
  const char *slash = strrchr(argv[0], '/');
  tool_name = slash ? slash + 1 : argv[0];
  tool_usage_text = usage;
  opterr = 0;
  while ((ch = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
    if (ch != 'h')
      tool_bad("unknown option '%s'", argv[optind - 1]);
    fputs(usage, stdout);
    exit(0);
  }
  return optind;
}

/* The operand @p s, a whole number in [min, max] (K, M, G suffixes). */
__attribute__((unused)) static uint64_t tool_num(const char *what, const char *s, uint64_t min, uint64_t max)
{
  char *end;
  errno = 0;
  unsigned long long v = s[0] == '-' ? 0 : strtoull(s, &end, 0);
  if (s[0] != '-' && errno == 0 && end != s) {
    if (*end == 'K' || *end == 'k') v <<= 10, end++;
    else if (*end == 'M' || *end == 'm') v <<= 20, end++;
    else if (*end == 'G' || *end == 'g') v <<= 30, end++;
    if (*end == '\0' && v >= min && v <= max)
      return v;
  }
  tool_bad("%s must be a whole number from %llu to %llu, not '%s'", what,
           (unsigned long long)min, (unsigned long long)max, s);
}

#endif
