/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rmx-fault-peer: the command line, and what both roles share.
 *
 *   rmx-fault-peer server URI [--ready FILE]
 *   rmx-fault-peer client URI msgs|rpc|write|idle [--ops N] [--loaded FILE]
 *                  [--fault-file FILE] [--deadline-ms MS] [--after-fault-ms MS]
 *   rmx-fault-peer reconnect URI [--ops N] [--loaded FILE] [--fault-file FILE]
 *                  [--deadline-ms MS]
 *   rmx-fault-peer kills URI|shm|tcp [--transfers N] [--stops N] [--seed S]
 *   rmx-fault-peer victim URI         (the kills test's client; it runs it)
 *
 * The server serves until SIGTERM (or until it is killed, which is the
 * point). The client runs its workload; with --ops 0 (the default) it keeps
 * going until the connection drops, then checks every callback and prints
 * one "fault-peer: result ..." line (tests/faults/README.md). The fault's
 * time: the injector creates --fault-file or sends SIGUSR1. The reconnecting
 * client (fault_reconnect.c) lives through one loss and comes back. The
 * kills test (fault_kills.c) is a server that kills its own clients.
 * Configuration comes from the RMX_* environment, untouched.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fault_kills.h"

static uint64_t mix(uint32_t seed, uint64_t word)
{
  uint64_t z = ((uint64_t)seed << 32 ^ word) + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* One mix per 8 bytes keeps 64 MiB checks affordable inside the TCG VM. */
void fp_fill(uint8_t *p, size_t len, uint32_t seed, size_t off)
{
  uint64_t v = mix(seed, off >> 3);
  for (size_t i = 0; i < len; i++) {
    size_t q = off + i;
    if ((q & 7) == 0)
      v = mix(seed, q >> 3);
    p[i] = (uint8_t)(v >> (8 * (q & 7)));
  }
}

int fp_check(const uint8_t *p, size_t len, uint32_t seed, size_t off)
{
  uint64_t v = mix(seed, off >> 3);
  for (size_t i = 0; i < len; i++) {
    size_t q = off + i;
    if ((q & 7) == 0)
      v = mix(seed, q >> 3);
    if (p[i] != (uint8_t)(v >> (8 * (q & 7))))
      return -1;
  }
  return 0;
}

void fp_msg_fill(uint8_t *p, size_t len, uint32_t seed)
{
  fp_msg_hdr_t h = {.seed = seed, .len = (uint32_t)len};
  memcpy(p, &h, sizeof(h));
  fp_fill(p + sizeof(h), len - sizeof(h), seed, 0);
}

int fp_msg_ok(const void *data, size_t len)
{
  fp_msg_hdr_t h;
  if (len < sizeof(h))
    return 0;
  memcpy(&h, data, sizeof(h));
  return h.len == len && fp_check((const uint8_t *)data + sizeof(h), len - sizeof(h), h.seed, 0) == 0;
}

double fp_now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int fp_write_file(const char *path, const char *text)
{
  char tmp[4096];
  snprintf(tmp, sizeof(tmp), "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  if (!f)
    return -1;
  fputs(text, f);
  if (fclose(f) != 0)
    return -1;
  return rename(tmp, path);
}

static int usage(void)
{
  fprintf(stderr, "usage: rmx-fault-peer server URI [--ready FILE]\n"
                  "       rmx-fault-peer client URI msgs|rpc|write|idle [--ops N]"
                  " [--loaded FILE] [--fault-file FILE] [--deadline-ms MS] [--after-fault-ms MS]\n"
                  "       rmx-fault-peer reconnect URI [--ops N] [--loaded FILE] [--fault-file FILE]"
                  " [--deadline-ms MS]\n"
                  "       rmx-fault-peer kills URI|shm|tcp [--transfers N] [--stops N] [--seed S]\n");
  return 2;
}

int main(int argc, char **argv)
{
  setvbuf(stdout, NULL, _IOLBF, 0); /* lines reach a script's pipe at once */
  if (argc >= 3 && strcmp(argv[1], "server") == 0) {
    const char *ready = NULL;
    for (int i = 3; i < argc; i++) {
      if (strcmp(argv[i], "--ready") == 0 && i + 1 < argc)
        ready = argv[++i];
      else
        return usage();
    }
    return fp_server_main(argv[2], ready);
  }
  if (argc == 3 && strcmp(argv[1], "victim") == 0)
    return fp_victim_main(argv[2]);
  if (argc >= 3 && strcmp(argv[1], "kills") == 0) {
    fk_opts_t k = {.uri = argv[2]};
    if ((argc - 3) % 2)
      return usage();
    for (int i = 3; i < argc; i += 2) {
      const char *v = argv[i + 1];
      if (strcmp(argv[i], "--transfers") == 0)
        k.transfers = atol(v);
      else if (strcmp(argv[i], "--stops") == 0)
        k.stops = atol(v);
      else if (strcmp(argv[i], "--seed") == 0)
        k.seed = strtoull(v, NULL, 0), k.seeded = 1;
      else
        return usage();
    }
    return fp_kills_main(&k);
  }
  int reconnect = argc >= 3 && strcmp(argv[1], "reconnect") == 0;
  if (reconnect || (argc >= 4 && strcmp(argv[1], "client") == 0)) {
    fp_client_opts_t o = {.uri = argv[2], .workload = reconnect ? "rpc" : argv[3],
                          .deadline_ms = 300000, .ops = reconnect ? 200 : 0};
    int first = reconnect ? 3 : 4;
    if (strcmp(o.workload, "msgs") && strcmp(o.workload, "rpc") && strcmp(o.workload, "write") &&
        strcmp(o.workload, "idle"))
      return usage();
    if ((argc - first) % 2)
      return usage(); /* options come in pairs: --name value */
    for (int i = first; i < argc; i += 2) {
      const char *v = argv[i + 1];
      if (strcmp(argv[i], "--ops") == 0)
        o.ops = atol(v);
      else if (strcmp(argv[i], "--loaded") == 0)
        o.loaded_file = v;
      else if (strcmp(argv[i], "--fault-file") == 0)
        o.fault_file = v;
      else if (strcmp(argv[i], "--deadline-ms") == 0)
        o.deadline_ms = atol(v);
      else if (strcmp(argv[i], "--after-fault-ms") == 0)
        o.after_fault_ms = atol(v);
      else
        return usage();
    }
    if (reconnect && (o.ops <= 0 || o.after_fault_ms))
      return usage();
    return reconnect ? fp_reconnect_main(&o) : fp_client_main(&o);
  }
  return usage();
}
