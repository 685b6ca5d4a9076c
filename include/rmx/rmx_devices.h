/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file rmx_devices.h
 * @brief The host's RDMA devices and which transports this process can use
 * (what rmx-info shows).
 *
 * Included by <rmx/rmx.h>; include that, not this file.
 */
#ifndef RMX_RMX_DEVICES_H
#define RMX_RMX_DEVICES_H

#ifndef RMX_RMX_H
#error "include <rmx/rmx.h>, which includes this file"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/** @name RDMA devices                                                  */
/* ------------------------------------------------------------------ */
/**@{*/

/** One port of an RDMA device. */
typedef struct rmx_port_info {
  uint8_t num;         /**< port number, from 1 */
  uint8_t active;      /**< 1 when the port is active: connections can use it */
  char state[16];      /**< "active", "down", "init", "armed", "active_defer" (else "other") */
  char link_layer[16]; /**< "ethernet" (RoCE) or "infiniband" */
  uint32_t mtu;        /**< the active MTU in bytes (0 when unknown) */
} rmx_port_info_t;

/** Ports described per device at most. */
#define RMX_DEV_MAX_PORTS 4

/** One RDMA device of the host, as rmx_device_list() finds it. */
typedef struct rmx_device_info {
  char name[64];        /**< e.g. "mlx5_0", "rxe0"; @c RMX_DEVICE takes it */
  uint64_t guid;        /**< node GUID in host byte order; @c RMX_DEVICE takes it as 16 hex
                             digits (printf "%016" PRIx64) */
  int index;            /**< its position in the list */
  int nports;           /**< entries of @c ports filled: the first RMX_DEV_MAX_PORTS ports that
                             could be queried */
  rmx_port_info_t ports[RMX_DEV_MAX_PORTS]; /**< its ports, from port 1 */
  uint32_t max_inline;  /**< bytes a queue pair of rmx sends inline on it (small frames from
                             unregistered memory); 0 if unknown */
  uint64_t max_mr_size; /**< largest memory registration in bytes; 0 when the device could not
                             be opened (only name, guid and index are filled in then) */
  int atomics;          /**< 1 when the device has 8-byte atomics (rmx_atomic_fadd(),
                             rmx_atomic_cswap()) */
  int key_scope;        /**< 1 when the device binds type-2 memory windows, which scope a
                             key to one connection (rendezvous sources,
                             rmx_mem_pack_for()); 0: it has none, and rmx gives each
                             connection a protection domain of its own instead (the
                             configuration's @c key_scope says which a context uses;
                             docs/security.md) */
} rmx_device_info_t;

/**
 * @brief Whether a URI scheme ("tcp", "rdma") can be used in this process.
 * @param scheme  the scheme, without "://"
 * @param[out] why  when it cannot: a sentence saying why (rdma-core not
 *        installed, rmx built without it), valid for the process's life;
 *        may be NULL
 * @return 0, @ref RMX_ENOTSUP (known scheme, not available here), or
 *         @ref RMX_EINVAL (no transport has that scheme)
 */
RMX_API int rmx_transport_available(const char *scheme, const char **why);

/**
 * @brief List the host's RDMA devices with their ports. Needs no context;
 * may block briefly while it opens each device.
 * @param[out] out  a malloc'ed array of @p *n devices (NULL when there is
 *                  none): free it with rmx_device_list_free()
 * @param[out] n    how many
 * @return 0 (@p *n = 0 when the host has no RDMA device, or its kernel no
 *         RDMA support), @ref RMX_ENOTSUP (no transport in this build lists
 *         devices: rmx was built without rdma-core), @ref RMX_ENOMEM,
 *         @ref RMX_EINVAL (@p out or @p n is NULL)
 */
RMX_API int rmx_device_list(rmx_device_info_t **out, int *n);
/** @brief Free what rmx_device_list() returned.
 *  @param list  that array (invalid afterwards), or NULL: nothing is done */
RMX_API void rmx_device_list_free(rmx_device_info_t *list);
/**@}*/

#ifdef __cplusplus
}
#endif
#endif /* RMX_RMX_DEVICES_H */
