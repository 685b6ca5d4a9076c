/* SPDX-License-Identifier: BSD-3-Clause */
/* A TCP relay on loopback that a test can cut (tcp_cut.c). */
#ifndef RMX_TEST_TCP_CUT_H
#define RMX_TEST_TCP_CUT_H

/* Relay one connection to 127.0.0.1:target_port: the relay's port, or -1. */
int tcp_cut_start(int target_port);
/* Turn the relay's loop once, without blocking. */
void tcp_cut_pump(void);
/* Reset both sides now. */
void tcp_cut(void);
void tcp_cut_stop(void);

#endif
