/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The attacker of shm_hostile.h, in two files: shm_hostile_attacker.c (its
 * connection through the library, the segment seen from outside it, the
 * rounds) and shm_hostile_attacks.c (what each kind writes). Its state,
 * and the calls between the two.
 */
#ifndef RMX_TEST_SHM_HOSTILE_ATTACKER_H
#define RMX_TEST_SHM_HOSTILE_ATTACKER_H

#include <stdatomic.h>

#include "shm_hostile.h"

#define QUIET_MS 20000 /* generous bounds on waits for the victim */
#define RESP_MS 20000

typedef struct sh_attacker {
  rmx_ctx_t *ctx;
  rmx_conn_t *c;
  sh_traffic_t t;
  sh_lines_t in;
  uint64_t seed;
  char uri[160];
  int connected, conn_status, ended, end_status, closed;
  /* the segment */
  uint8_t *base;
  size_t size;
  uint32_t ring;
  int own;           /* our own mapping, else the library's */
  uintptr_t lib_lo;  /* the library's mapping */
  int sock;          /* the connection's Unix socket (the library's: only polled) */
  uint8_t big[SH_REGION];
  char note[160];
} sh_attacker_t;

extern sh_attacker_t A;

/* shm_hostile_attacker.c */
void at_big_done(rmx_conn_t *c, int status, void *arg);
int at_seg_alive(void);
_Atomic uint32_t *at_word(int r, unsigned off);
uint32_t at_ld(int r, unsigned off);
void at_st(int r, unsigned off, uint32_t v);
uint8_t *at_data(int r);
void at_ring_bells(void);
void at_publish(const uint8_t *b, size_t n);
void at_frame_hdr(uint8_t *p, uint32_t blen, uint8_t kind, uint8_t flags, uint16_t rsv);
int at_quiesce(void);
int at_response(uint8_t kind, uint64_t id);
void at_region_of(uint64_t *addr, uint64_t *key);

/* shm_hostile_attacks.c */
int at_ring0_full(void);
void at_attack(sh_kind_t k);

#endif
