/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The soak's verdict, from the lines the last incarnation of each client
 * and server printed (soak_client.c, soak_server.c) and the faults the
 * driver injected. Prints one summary line; returns the failures.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "soak.h"

/* name=value in a report line; -1 when absent. */
static long long field(const char *line, const char *name)
{
  size_t n = strlen(name);
  for (const char *p = line; (p = strstr(p, name)); p += n)
    if ((p == line || p[-1] == ' ') && p[n] == '=')
      return strtoll(p + n + 1, NULL, 10);
  return -1;
}

static int failures;

static void fail_who(int bad, const char *who, const char *what, int idx, long long v)
{
  if (!bad)
    return;
  failures++;
  fprintf(stderr, "soak: FAIL: %s %d: %s (%lld)\n", who, idx, what, v);
}

static void fail_if(int bad, const char *what, int idx, long long v)
{
  fail_who(bad, "client", what, idx, v);
}

#define MIB(x) ((double)(x) / (1024.0 * 1024.0))

int soak_check(void)
{
  soak_counts_t k;
  soak_counts(&k);
  int ns = k.nservers, nc = k.nclients;
  unsigned long kills = k.kills, stops = k.stops, ckills = k.client_kills,
                scorrupt = k.server_corrupt;
  failures = k.failed;
  long long ops = 0, losses = 0, recon = 0, lost_ops = 0, corrupt = (long long)scorrupt,
            viol = (long long)k.server_resent;
  long long tol = (long long)strtoull(getenv("RMX_TEST_SOAK_RSS_TOL_MIB") ? getenv("RMX_TEST_SOAK_RSS_TOL_MIB")
                                                                      : "8", NULL, 0) << 20;
  int warmed = 0, rss_checked = !soak_sanitized();
  char fds[256] = "", rss[384] = "", sfds[256] = "";

  for (int i = 0; i < nc; i++) {
    const char *r = soak_report_of(1, i);
    if (!*r) {
      failures++;
      fprintf(stderr, "soak: FAIL: client %d gave no report\n", i);
      continue;
    }
    printf("soak: %s\n", r);
    ops += field(r, "ops");
    losses += field(r, "losses");
    recon += field(r, "reconnects");
    lost_ops += field(r, "failed_at_loss");
    corrupt += field(r, "corrupted");
    viol += field(r, "violations");
    fail_if(field(r, "corrupted") != 0, "corrupted bytes", i, field(r, "corrupted"));
    fail_if(field(r, "violations") != 0, "callback contract violations", i, field(r, "violations"));
    fail_if(field(r, "errors") != 0, "operations failed without a loss", i, field(r, "errors"));
    fail_if(field(r, "call_errors") != 0, "calls refused", i, field(r, "call_errors"));
    fail_if(field(r, "unfinished") != 0, "connections not up and idle at the end", i,
            field(r, "unfinished"));
    fail_if(field(r, "ops") <= 0, "no operations done", i, field(r, "ops"));

    long long fw = field(r, "fd_warm"), fm = field(r, "fd_max"), fe = field(r, "fd_end");
    long long rw = field(r, "rss_warm"), rm = field(r, "rss_max"), re = field(r, "rss_end");
    size_t fl = strlen(fds), rl = strlen(rss);
    if (fw < 0) { /* a client restarted late never warmed up: nothing to compare */
      snprintf(fds + fl, sizeof(fds) - fl, "%s-", i ? " " : "");
      snprintf(rss + rl, sizeof(rss) - rl, "%s-", i ? " " : "");
      continue;
    }
    warmed++;
    snprintf(fds + fl, sizeof(fds) - fl, "%s%lld/%lld/%lld", i ? " " : "", fw, fm, fe);
    snprintf(rss + rl, sizeof(rss) - rl, "%s%.1f/%.1f/%.1f", i ? " " : "", MIB(rw), MIB(rm),
             MIB(re));
    fail_if(fm != fw, "descriptors grew after the warm-up (max)", i, fm - fw);
    fail_if(fe != fw, "descriptors at the end differ from the warm-up", i, fe - fw);
    if (rss_checked) {
      fail_if(rm - rw > tol, "heap in use outside the pool grew after the warm-up (max, bytes)", i, rm - rw);
      fail_if(re - rw > tol, "heap in use outside the pool at the end above the warm-up (bytes)", i, re - rw);
    }
  }
  for (int i = 0; i < ns; i++) {
    const char *r = soak_report_of(0, i);
    if (!*r) {
      failures++;
      fprintf(stderr, "soak: FAIL: server %d gave no report\n", i);
      continue;
    }
    printf("soak: server %d: %s\n", i, r);
    /* samples with every client connected, after the warm-up; none when
     * the last incarnation of the server was short */
    long long fw = field(r, "fd_warm"), fm = field(r, "fd_max");
    long long rw = field(r, "rss_warm"), rm = field(r, "rss_max");
    size_t sl = strlen(sfds);
    snprintf(sfds + sl, sizeof(sfds) - sl, "%s%s", i ? " " : "", fw < 0 ? "-" : "");
    if (fw < 0)
      continue;
    sl = strlen(sfds);
    snprintf(sfds + sl, sizeof(sfds) - sl, "%lld/%lld", fw, fm);
    fail_who(fm != fw, "server", "descriptors grew after the warm-up", i, fm - fw);
    if (rss_checked)
      fail_who(rm - rw > tol, "server", "heap in use outside the pool grew after the warm-up (bytes)", i, rm - rw);
  }
  if (scorrupt) {
    failures++;
    fprintf(stderr, "soak: FAIL: servers received %lu corrupted bytes\n", scorrupt);
  }
  if (k.server_resent) {
    failures++;
    fprintf(stderr, "soak: FAIL: servers received %lu operations twice\n", k.server_resent);
  }
  /* The soak proves nothing if nothing went wrong on purpose. */
  if (warmed == 0) {
    failures++;
    fprintf(stderr, "soak: FAIL: no client took a resource sample after its warm-up\n");
  }
  if (kills + stops > 0 && (losses == 0 || recon == 0)) {
    failures++;
    fprintf(stderr, "soak: FAIL: faults were injected but no loss or reconnect was seen\n");
  }

  printf("soak: %s ops=%lld losses=%lld reconnects=%lld failed_at_loss=%lld "
         "server_kills=%lu server_stops=%lu client_kills=%lu corrupted=%lld violations=%lld "
         "fds(warm/max/end)=[%s] heap_MiB(warm/max/end)=[%s] server_fds(warm/max)=[%s]%s\n",
         failures ? "FAIL" : "PASS", ops, losses, recon, lost_ops, kills, stops, ckills, corrupt,
         viol, fds, rss, sfds, rss_checked ? "" : " (rss not checked: sanitizer build)");
  return failures;
}
