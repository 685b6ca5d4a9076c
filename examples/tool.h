/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the command-line tools share:
 *  - -h/--help: the usage on stdout, exit 0;
 *  - --version: "<tool> <library version>" on stdout, exit 0;
 *  - a usage error: one line on stderr, "<tool>: <what is wrong> (try
 *    '<tool> --help')", exit 2. A URI that is not of rmx's form, or names
 *    no transport rmx has, is a usage error too; a runtime failure (a
 *    refused connection, a device that is not there) exits 1;
 *  - numbers: decimal always (010 is ten), an optional K, M or G suffix
 *    (2^10, 2^20, 2^30), checked for overflow and for their range.
 */
#ifndef RMX_EXAMPLES_TOOL_H
#define RMX_EXAMPLES_TOOL_H

#include <getopt.h>
#include <rmx/rmx.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *tool_usage_text, *tool_name = "rmx";

/* The tool's name from argv[0]; its usage text. */
__attribute__((unused)) static void tool_init(char **argv, const char *usage)
{
  const char *slash = strrchr(argv[0], '/');
  tool_name = slash ? slash + 1 : argv[0];
  tool_usage_text = usage;
}

/* A usage error: one line saying what is wrong; exit 2. */
__attribute__((noreturn, format(printf, 1, 2))) static void tool_bad(const char *fmt, ...)
{
  va_list ap;
  fprintf(stderr, "%s: ", tool_name);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, " (try '%s --help')\n", tool_name);
  exit(2);
}

__attribute__((noreturn, unused)) static void tool_help(void)
{
  fputs(tool_usage_text, stdout);
  exit(0);
}

__attribute__((noreturn, unused)) static void tool_version(void)
{
  printf("%s %s\n", tool_name, rmx_version_string());
  exit(0);
}

/* Options before the operands: -h/--help, --version, and the tool's own
 * long options in @p extra (at most 13, ended by a zeroed entry; NULL for
 * none), each handed to @p take with its argument (NULL for none). Any
 * other option, or one of them without its argument, is a usage error.
 * Returns the index of the first operand. */
__attribute__((unused)) static int tool_options_with(int argc, char **argv, const char *usage,
                                                     const struct option *extra,
                                                     void (*take)(int ch, const char *arg))
{
  struct option opts[16] = {{"help", no_argument, NULL, 'h'},
                            {"version", no_argument, NULL, 'V'}};
  size_t n = 2;
  for (; extra && extra->name; extra++) {
    if (n == sizeof(opts) / sizeof(opts[0]) - 1)
      abort(); /* the tool's own table is too long for this one */
    opts[n++] = *extra;
  }
  int ch;
  tool_init(argv, usage);
  opterr = 0;
  while ((ch = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
    if (ch == 'h')
      tool_help();
    if (ch == 'V')
      tool_version();
    if (ch == '?' || !take)
      tool_bad("unknown option '%s'", argv[optind - 1]);
    take(ch, optarg);
  }
  return optind;
}

/* Options before the operands: -h/--help and --version, nothing else.
 * Returns the index of the first operand. */
__attribute__((unused)) static int tool_options(int argc, char **argv, const char *usage)
{
  return tool_options_with(argc, argv, usage, NULL, NULL);
}

/* @p s as a whole number in [min, max]: decimal digits, then at most one
 * of K, M, G (either case). 0 and the value in *out, or -1 when it is not
 * a number of that form, or -2 when it (or it times its suffix) is out of
 * range, overflowing 64 bits included. */
__attribute__((unused)) static int tool_parse_num(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
  uint64_t v = 0;
  const char *p = s;
  int over = 0;
  if (*p < '0' || *p > '9')
    return -1;
  for (; *p >= '0' && *p <= '9'; p++) {
    unsigned d = (unsigned)(*p - '0');
    if (v > (UINT64_MAX - d) / 10)
      over = 1;
    else
      v = v * 10 + d;
  }
  unsigned shift = 0;
  switch (*p) {
  case 'K': case 'k': shift = 10, p++; break;
  case 'M': case 'm': shift = 20, p++; break;
  case 'G': case 'g': shift = 30, p++; break;
  default: break;
  }
  if (*p != '\0')
    return -1;
  if (shift && v > (UINT64_MAX >> shift))
    over = 1;
  v <<= shift;
  if (over || v < min || v > max)
    return -2;
  *out = v;
  return 0;
}

/* The argument @p s, named @p what in messages, a whole number in [min,
 * max] (see tool_parse_num); anything else is a usage error. */
__attribute__((unused)) static uint64_t tool_num(const char *what, const char *s, uint64_t min,
                                                 uint64_t max)
{
  uint64_t v;
  int rc = tool_parse_num(s, min, max, &v);
  if (rc == -1)
    tool_bad("%s '%s' is not a whole number (decimal digits, then K, M or G at most)", what, s);
  if (rc == -2)
    tool_bad("%s '%s' is out of range: from %llu to %llu", what, s, (unsigned long long)min,
             (unsigned long long)max);
  return v;
}

/*
 * The URI argument @p uri, named @p what: of rmx's form (scheme://host, then
 * :PORT or nothing; an IPv6 host in brackets; as rmx_connect() and
 * rmx_listen() parse it) and naming a transport rmx has, or a usage error.
 * A transport rmx has but that cannot be used here (rdma:// without a
 * device) passes: that is the run's failure, not the command line's.
 */
__attribute__((unused)) static void tool_uri(const char *what, const char *uri)
{
  const char *why = NULL, *sep = strstr(uri, "://");
  size_t slen = sep ? (size_t)(sep - uri) : 0;
  if (!sep)
    why = "no \"://\" after the scheme";
  else if (slen == 0 || slen > 15 || strspn(uri, "abcdefghijklmnopqrstuvwxyz0123456789") != slen)
    why = "the scheme is not 1 to 15 lower-case letters and digits";
  if (!why) {
    const char *h = sep + 3, *rest;
    size_t hlen;
    if (*h == '[') {
      const char *close = strchr(h, ']');
      hlen = close ? (size_t)(close - h - 1) : 0;
      rest = close ? close + 1 : NULL;
      if (!close)
        why = "an IPv6 address without its closing ']'";
    } else {
      hlen = strcspn(h, ":/");
      rest = h + hlen;
      if (memchr(h, ']', hlen))
        why = "a ']' in the host without its '['";
    }
    if (why) {
    } else if (hlen == 0) {
      why = "no host";
    } else if (hlen > 255) {
      why = "the host is longer than 255 bytes";
    } else if (*rest == ':') {
      size_t plen = strspn(rest + 1, "0123456789");
      if (plen == 0 || rest[1 + plen] != '\0')
        why = "the port is not a number";
      else if (plen > 5 || strtoul(rest + 1, NULL, 10) > 65535)
        why = "the port is over 65535";
    } else if (*rest != '\0') {
      why = "something after the host that is not \":PORT\"";
    }
  }
  if (!why) {
    char scheme[16];
    memcpy(scheme, uri, slen);
    scheme[slen] = '\0';
    if (strcmp(scheme, "auto") != 0 && rmx_transport_available(scheme, NULL) == RMX_EINVAL)
      why = "no transport has that scheme (tcp, rdma or auto)";
  }
  if (why)
    tool_bad("%s '%s' is not an rmx URI (scheme://host[:port]): %s", what, uri, why);
}

/* After rmx_connect() or rmx_listen() refused @p uri with @p rc: RMX_EINVAL
 * means the URI (a usage error, exit 2); anything else is the run's
 * failure, said on stderr, and 1 is returned. */
__attribute__((unused)) static int tool_uri_failed(const char *doing, const char *uri, int rc)
{
  if (rc == RMX_EINVAL)
    tool_bad("cannot %s '%s': %s", doing, uri, rmx_strerror(rc));
  fprintf(stderr, "%s: cannot %s %s: %s\n", tool_name, doing, uri, rmx_strerror(rc));
  return 1;
}

#endif
