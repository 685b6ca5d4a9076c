/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The RDMA port under the two-thread verbs test: its state, its netdev,
 * and taking it down and up (root inside the SoftRoCE VM).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "verbs_threads.h"

static char g_netdev[64] = "rxevm0";

int port_active(void)
{
  char path[160], buf[64] = "";
  const char *dev = getenv("RXE_VM_DEV") ? getenv("RXE_VM_DEV") : "rxe0";
  snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/state", dev);
  FILE *f = fopen(path, "r");
  if (!f)
    return 0;
  if (!fgets(buf, sizeof(buf), f))
    buf[0] = '\0';
  fclose(f);
  return strstr(buf, "ACTIVE") != NULL;
}

void find_netdev(void)
{
  char path[160];
  const char *dev = getenv("RXE_VM_DEV") ? getenv("RXE_VM_DEV") : "rxe0";
  snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/gid_attrs/ndevs/0", dev);
  FILE *f = fopen(path, "r");
  if (f) {
    if (fgets(g_netdev, sizeof(g_netdev), f))
      g_netdev[strcspn(g_netdev, "\n")] = '\0';
    fclose(f);
  }
}

static int link_set(const char *state)
{
  char cmd[128];
  snprintf(cmd, sizeof(cmd), "ip link set dev %s %s", g_netdev, state);
  return system(cmd);
}

/* Down and at once up again, in one ip call: the device reports PORT_ERR
 * (then PORT_ACTIVE), and the closes that follow find the port up (see the
 * top for what closing with the port down does to SoftRoCE). */
int link_flap(void)
{
  char cmd[192];
  snprintf(cmd, sizeof(cmd), "printf 'link set dev %s down\\nlink set dev %s up\\n' | ip -batch -",
           g_netdev, g_netdev);
  return system(cmd);
}

/* Up again, and the port active, before the next test connects. */
void port_restore(void)
{
  assert_int_equal(link_set("up"), 0);
  for (int i = 0; i < 200 && !port_active(); i++)
    usleep(50000);
  assert_true(port_active());
}

