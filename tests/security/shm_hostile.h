/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The hostile-segment test (tests/security): one program in four roles,
 * each a process of its own (fork+exec of itself).
 *
 *   rmx-shm-hostile                    the driver (shm_hostile.c)
 *   rmx-shm-hostile --victim NAME      the server under attack: listens on
 *                                      shm://NAME, echoes messages, answers
 *                                      RPC, serves one region per connection
 *                                      (shm_hostile_victim.c)
 *   rmx-shm-hostile --client NAME long|fresh
 *                                      a well-behaved client that checks every
 *                                      byte it gets back (shm_hostile_client.c)
 *   rmx-shm-hostile --attacker NAME SEED
 *                                      connects through the library, maps the
 *                                      connection's segment itself and writes
 *                                      into it (shm_hostile_attacker.c)
 *
 * Everything here uses the public API only; the segment's layout and the
 * stream's framing come from docs/protocol.md ("Shared memory (shm://)",
 * "TCP stream framing"), written down below, not taken from the library.
 *
 * The roles talk to the driver over pipes: the driver writes command lines
 * on a role's stdin, the role prints answer lines on its stdout ("word
 * args..."). Logs go to stderr.
 */
#ifndef RMX_TEST_SHM_HOSTILE_H
#define RMX_TEST_SHM_HOSTILE_H

#include <stddef.h>
#include <stdint.h>

#include <rmx/rmx.h>

/* ---- what the victim serves ---- */
#define SH_RPC_XOR 1            /* reply: the request, every byte ^ SH_XOR */
#define SH_XOR 0xa5
#define SH_REGION (256u << 10)  /* each connection's region (heap, exactly this size) */
#define SH_EAGER 8192u          /* the victim's eager size: its largest frame */
#define SH_TAG_KEY 0x2159454bu  /* "KEY!": the victim's first message, a packed key */
#define SH_TAG_ECHO 0x4f484345u /* "ECHO": a message the victim sends back as it came */

/* ---- the segment, as docs/protocol.md lays it out ---- */
#define SEG_MAGIC 0x53584d52u   /* "RMXS" */
#define SEG_HDR 64u
#define SEG_CTRL(r) (64u + 192u * (unsigned)(r))        /* ring r's control lines */
#define SEG_DATA(r, ring) (512u + (unsigned)(r) * (ring)) /* ring r's data */
#define CTRL_HEAD 0u            /* u32: bytes the producer ever wrote */
#define CTRL_TAIL 64u           /* u32: bytes the consumer ever consumed */
#define CTRL_RD_ARMED 128u      /* u32: the consumer sleeps */
#define CTRL_WR_ARMED 132u      /* u32: the producer sleeps */
/* Ring 0: the accepting side (the victim) produces. Ring 1: the connector. */

/* ---- the stream framing: u32 body length, u8 kind, u8 flags, u16 reserved ---- */
#define TFH 8u
enum { TK_HELLO = 1, TK_HELLO_ACK, TK_REJECT, TK_RD_REQ = 5, TK_RD_RESP, TK_WR_REQ, TK_WR_RESP,
       TK_AT_REQ, TK_AT_RESP, TK_FRAME = 16 /* + the rmx frame's type (1: DATA) */ };

/* ---- shared by the roles (shm_hostile_common.c) ---- */

/* One control line on stdout, flushed. */
void sh_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Print why, then exit(1). */
void sh_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* Lines read from a pipe without blocking. */
typedef struct sh_lines {
  int fd, eof;
  size_t used;
  char buf[4096];
} sh_lines_t;
/* Read what is there (non-blocking fd); 0, or -1 at EOF or error. */
int sh_lines_fill(sh_lines_t *l);
/* The next whole line, without its newline, into out: 1, else 0. */
int sh_lines_next(sh_lines_t *l, char *out, size_t n);
/* Block until a whole line comes: 1, or 0 at EOF. */
int sh_lines_wait(sh_lines_t *l, char *out, size_t n);

/* Wait up to cap_ms (less when the context has a timer due) for the
 * context's fd or for in, then progress the context. Returns 1 when in has
 * input (or its end). */
int sh_turn(rmx_ctx_t *ctx, sh_lines_t *in, int cap_ms);

uint64_t sh_now_ms(void);
uint64_t sh_rand(uint64_t *s);
/* The byte at i of message or region pattern seq. */
static inline uint8_t sh_pat(uint64_t seq, size_t i)
{
  return (uint8_t)(seq * 131u + i * 7u + (i >> 8));
}

/* Open fds of this process (the scan's own not counted), and the lines of
 * /proc/self/maps naming an rmx segment (memfd:rmx-shm). */
int sh_count_fds(void);
int sh_count_seg_maps(void);

/* ---- traffic that checks every byte (shm_hostile_traffic.c) ---- */

typedef struct sh_traffic {
  rmx_ctx_t *ctx;
  rmx_conn_t *c;
  rmx_rkey_t *rk;   /* the victim's region for this connection */
  uint8_t key[RMX_RKEY_MAX]; /* its packed key, as it came */
  size_t key_len;
  int strict;       /* a wrong byte or a failed operation is fatal (the good client) */
  int posting;      /* post new operations as the windows allow */
  uint64_t seed;
  uint64_t next_seq, want_seq; /* echoes sent, echoes seen back */
  unsigned echo_out, rpc_out;
  int rma_state;    /* 0 idle, 1 writing, 2 reading back */
  uint64_t rma_seq, rma_off;
  size_t rma_len;
  uint8_t *rma_w, *rma_r;
  uint64_t done;    /* operations completed and checked */
  uint64_t bad;     /* completed wrong (not fatal when !strict) */
  uint64_t failed;  /* completed with an error */
  char why[200];    /* the first wrong or failed one */
} sh_traffic_t;

void sh_traffic_init(sh_traffic_t *t, rmx_ctx_t *ctx, rmx_conn_t *c, uint64_t seed, int strict);
/* Post what the windows allow (when posting). */
void sh_traffic_pump(sh_traffic_t *t);
/* on_recv, with the traffic as its argument: the victim's key (unpacked
 * into t->rk) or an echo. */
void sh_traffic_recv(rmx_conn_t *c, const void *data, size_t len, void *t);
/* Nothing outstanding. */
int sh_traffic_idle(const sh_traffic_t *t);
void sh_traffic_fini(sh_traffic_t *t);

/* ---- the roles ---- */
int sh_victim_main(const char *name);
int sh_client_main(const char *name, const char *mode);
int sh_attacker_main(const char *name, uint64_t seed);

/* The attacks, one per round (shm_hostile_attacker.c). What the victim must
 * do is the driver's (shm_hostile.c): end with RMX_EPROTO, go on unharmed,
 * answer a forged request with RMX_EACCES, or end any way it likes (the
 * corruption is valid-looking or only the attacker reads it). */
typedef enum sh_kind {
  K_HEAD_PAST,   /* ring 1's head (the victim reads it) past its tail + size */
  K_HEAD_BACK,   /* ... behind the head it saw */
  K_HEAD_HUGE,   /* ... 2^31 on */
  K_HEAD_WRAP,   /* ... one before its tail (a full turn of 2^32 on) */
  K_HEAD_CLAIM,  /* ... claims bytes never written (the ring's old bytes) */
  K_TAIL_PAST,   /* ring 0's tail (the victim reads it while it waits for room) past its head */
  K_TAIL_BACK,   /* ... behind the tail it saw */
  K_TAIL_CLAIM,  /* ... claims the ring was read (valid-looking: the victim writes on) */
  K_FLAGS,       /* the sleep flags of both rings, set and cleared at random */
  K_HDR,         /* the segment header: magic, version, sizes, reserved bytes */
  K_DATA0,       /* garbage over ring 0's data (what only the attacker reads) */
  F_LEN_MAX,     /* a frame header in ring 1: a message of 2^32 - 1 bytes */
  F_LEN_RING,    /* ... longer than the ring */
  F_LEN_LIMIT,   /* ... one byte over the victim's frame limit */
  F_LEN_SMALL,   /* ... a message of 0 or 1 bytes, on credits never given */
  F_PARTIAL,     /* ... a message whose body never comes (a stall) */
  F_KIND,        /* ... a kind no one speaks */
  F_RESERVED,    /* ... a response with flags and reserved bits set */
  F_HELLO,       /* ... a second hello */
  F_RD_OOB,      /* a read request with the attacker's own key, past its region */
  F_WR_OOB,      /* a write request likewise, with its data */
  F_RD_WRAP,     /* a read request whose range wraps at 2^64 */
  F_GARBAGE,     /* random bytes, published */
  R_ANY,         /* under load, at random moments: any word, any value */
  R_IDX,         /* ... the four indices only */
  K_DIE,         /* a stall, then the attacker's process exits (last round only) */
  SH_KINDS
} sh_kind_t;

extern const char *const sh_kind_names[SH_KINDS];
/* The kinds the victim must refuse at once: it ends the connection with
 * RMX_EPROTO while the attacker is still frozen. */
int sh_kind_refused(sh_kind_t k);

#endif
