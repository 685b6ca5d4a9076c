/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The transport registry: which transports this build has, by URI scheme,
 * and which auto:// prefers. The core names no transport anywhere else;
 * adding one touches this pair and the transport's own folder.
 */
#ifndef RMX_REGISTRY_H
#define RMX_REGISTRY_H

#include "../transport/transport.h"

/* Slots in the registry, built or not: a context keeps one instance per
 * slot, and a packed key one entry at most per slot. */
enum { RMX_TP_COUNT = 3 };

/* The slot of a URI scheme: 0 and *slot, RMX_EINVAL (unknown scheme), or
 * RMX_ENOTSUP (known, not built: *why says why). "auto" is not a slot:
 * see rmx__tp_order. */
int rmx__tp_lookup(const char *scheme, int *slot, const char **why);
/* RMX_TRANSPORTS (spec; empty: the default order): the slots auto:// tries,
 * best first, built or not, into slots (NULL: only check), and whether
 * the one listed is required. Returns how many, or RMX_EINVAL with *why. */
int rmx__tp_order(const char *spec, int slots[RMX_TP_COUNT], int *required, const char **why);
/* The ops of a slot, or NULL when that transport is not built. */
const rmx_tp_ops_t *rmx__tp_ops(int slot);

#endif
